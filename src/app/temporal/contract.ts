/**
 * What every feature's workflows share: the default task queue, and the platform's smoke-test
 * workflow (workflows/ping.ts) that proves the front door → Temporal → worker round trip.
 */

/** The default task queue. Deployments may override it with TEMPORAL_TASK_QUEUE. */
export const DEFAULT_TASK_QUEUE = 'control-plane';

export function pingWorkflowId(id: string): string {
  return `ping/${id}`;
}
