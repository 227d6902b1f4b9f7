import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { echo } = proxyActivities<Activities>({ startToCloseTimeout: '10s' });

/** A trivial workflow that proves the front door → Temporal → worker → activity round trip. */
export async function ping(text: string): Promise<{ text: string; workflowId: string }> {
  return echo(text);
}
