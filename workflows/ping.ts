import { proxyActivities } from '@temporalio/workflow';
import type { PlatformActivities } from '../activities/platform';
import { implementsWorkflow, pingWorkflow } from '../src/app/temporal/contract';

const { echo } = proxyActivities<PlatformActivities>({ startToCloseTimeout: '10s' });

/** A trivial workflow that proves the front door → Temporal → worker → activity round trip. */
export async function ping(text: string): Promise<{ text: string; workflowId: string }> {
  return echo(text);
}

implementsWorkflow(pingWorkflow, ping);
