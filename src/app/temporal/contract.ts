/**
 * What every feature's workflows share: the default task queue, and the platform's smoke-test
 * workflow (workflows/ping.ts) that proves the front door → Temporal → worker round trip.
 */

/** The default task queue. Deployments may override it with TEMPORAL_TASK_QUEUE. */
export const DEFAULT_TASK_QUEUE = 'control-plane';

export function pingWorkflowId(id: string): string {
  return `ping/${id}`;
}

/**
 * A workflow type as the code that starts it names it: the type's name, with the arguments and
 * result of its function as types only. Each feature defines its refs once, in its contract.ts,
 * and hands them to the ingress gateway (src/app/ingress.ts); nothing outside workflows/ imports a
 * workflow function, and no workflow type is written as a bare string where it is used.
 */
export interface WorkflowRef<Args extends unknown[] = unknown[], Result = unknown> {
  readonly workflowType: string;
  /** Never set: carries the argument and result types. */
  readonly types?: { args: Args; result: Result };
}

export function workflowRef<Args extends unknown[], Result>(workflowType: string): WorkflowRef<Args, Result> {
  return { workflowType };
}

/**
 * Holds a workflow function to its contract's ref, once, beside the function: the types must
 * match at compile time, and the name when the bundle loads (a mismatch throws there, so a
 * renamed function cannot leave its ref pointing at nothing).
 */
export function implementsWorkflow<Args extends unknown[], Result>(
  ref: WorkflowRef<Args, Result>,
  workflow: (...args: Args) => Promise<Result>,
): void {
  if (workflow.name !== ref.workflowType) {
    throw new Error(`workflow function ${workflow.name} does not implement its contract's type ${ref.workflowType}`);
  }
}

/** The smoke-test workflow (workflows/ping.ts). */
export const pingWorkflow = workflowRef<[string], { text: string; workflowId: string }>('ping');

/**
 * What a workflow tells its worker process outside its history (Temporal sinks: not called on
 * replay): how long a report took from its receipt at the front door to its application in the
 * run, in ms (src/app/engine-delay.ts publishes it).
 */
export type EngineDelaySinks = { engineDelay: { lag(ms: number): void } };
