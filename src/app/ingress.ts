/**
 * The durable-ingress gateway: the one way a route makes work durable before it answers.
 *
 * "An ack means durable": a route answers 2xx only after Temporal holds the work. Both calls
 * are bounded by TEMPORAL_START_TIMEOUT (temporalCall); an outage, or no answer in time, is a
 * coded 503 so the sender retries, never an ack. The workflow id is the dedupe key:
 * - `startOnce` starts a workflow unless its id exists or existed (REJECT_DUPLICATE, which holds
 *   for the namespace retention): a provider's retry of a delivery, even one racing the first,
 *   is a `duplicate`.
 * - `signalWithStart` delivers a signal, starting the workflow on the first one (conflict policy
 *   USE_EXISTING, the SDK default). REJECT_DUPLICATE keeps a late signal from reviving a
 *   finished workflow: that is `closed`.
 * - `updateWithStart` is the same with an Update, for work the workflow must decide on before the
 *   ack: the answer waits for a worker to run the Update's validator. A refusal comes back as
 *   `refused` with the validator's ApplicationFailure; nothing was recorded. Bounded by
 *   TEMPORAL_UPDATE_TIMEOUT, longer than a start because a worker must answer too.
 *
 *
 * Every call names its tenant (the organization, or for a GitHub delivery that matches none its
 * installation) and how it takes admission (src/app/admission.ts): the call waits for or is shed
 * by its tenant's admission, and the workflow it starts carries the tenant as its fairness key
 * (src/app/temporal/fairness.ts), so the engine dispatches organizations fairly.
 *
 * The benchmark-only gateway that skips Temporal is chosen at composition (src/main/api.ts).
 */
import {
  ApplicationFailure,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  WorkflowUpdateFailedError,
  type SignalDefinition,
  type UpdateDefinition,
  type Workflow,
  type WorkflowSignalWithStartOptions,
  type WorkflowStartOptions,
} from '@temporalio/client';
import type { Priority } from '@temporalio/common';
import type { Admission, AdmissionMode } from './admission';
import { errors } from './errors';
import type { Metrics } from './metrics';
import { temporalCall, type TemporalClientHandle } from './temporal/client';
import type { Fairness } from './temporal/fairness';

/** `not_enqueued`: only from the benchmark gateway, which acks without Temporal. */
export type StartOutcome = 'enqueued' | 'duplicate' | 'not_enqueued';
type SignalOutcome = 'enqueued' | 'closed' | 'not_enqueued';
/** The server's failure type for an Update the worker never saw (see updateWithStart). */
const UNPROCESSED_UPDATE = 'UnprocessedUpdate';

type UpdateOutcome<R> =
  { outcome: 'enqueued'; result: R } | { outcome: 'refused'; refusal: ApplicationFailure } | { outcome: 'closed' | 'not_enqueued' };

/** Whose work this is and how it takes admission. */
export interface Tenancy {
  /** The organization id, or another stable key when no organization is known (at most 64 bytes). */
  tenant: string;
  admission: AdmissionMode;
}

interface StartOptions extends Tenancy {
  /** Known at start, so no upsert command is needed in the workflow (the Web UI filters on them). */
  searchAttributes?: WorkflowStartOptions['typedSearchAttributes'];
}

interface SignalOptions extends StartOptions {
  /**
   * For actors that close when idle and must start again on the next signal (a GitHub target's
   * workflow): a closed workflow of the id is started anew instead of answering `closed`.
   */
  reopen?: boolean;
}

export interface IngressGateway {
  startOnce<W extends Workflow>(workflow: W, workflowId: string, args: Parameters<W>, options: StartOptions): Promise<StartOutcome>;
  signalWithStart<W extends Workflow, A extends unknown[]>(
    workflow: W,
    workflowId: string,
    args: Parameters<W>,
    signal: SignalDefinition<A>,
    signalArgs: A,
    options: SignalOptions,
  ): Promise<SignalOutcome>;
  updateWithStart<W extends Workflow, R, A extends unknown[]>(
    workflow: W,
    workflowId: string,
    args: Parameters<W>,
    update: UpdateDefinition<R, A>,
    updateArgs: A,
    tenancy: Tenancy,
  ): Promise<UpdateOutcome<R>>;
  /** The priority a start for `tenant` carries, for a start that does not go through this gateway (MCP resolve). */
  priority(tenant: string): Promise<Priority | undefined>;
  /**
   * Throws admission's shed error when this process knows `tenant`'s share of the moment is
   * spent (no I/O): a route calls it before its own Postgres work for a request in `shed` mode.
   */
  shedIfSpent(tenant: string): void;
}

interface GatewayDeps {
  temporal: TemporalClientHandle;
  startTimeoutMs: number;
  updateTimeoutMs: number;
  metrics: Metrics;
  fairness: Fairness;
  admission: Admission;
}

/** Runs one engine call under the tenant's admission, with the priority its start carries. */
async function admitted<T>(deps: GatewayDeps, tenancy: Tenancy, call: (priority: { priority?: Priority }) => Promise<T>): Promise<T> {
  const ticket = await deps.admission.admit(tenancy.tenant, tenancy.admission);
  try {
    const priority = await deps.fairness.priority(tenancy.tenant);
    return await call(priority ? { priority } : {});
  } finally {
    ticket.release();
  }
}

/** A start-like call under the tenant's admission, bounded by TEMPORAL_START_TIMEOUT (a 503 past it). */
function admittedStart<T>(
  deps: GatewayDeps,
  tenancy: Tenancy,
  operation: 'start' | 'signalWithStart',
  call: (priority: { priority?: Priority }) => Promise<T>,
): Promise<T> {
  return admitted(deps, tenancy, (priority) =>
    temporalCall(deps.temporal, operation, deps.startTimeoutMs, () => call(priority), deps.metrics),
  );
}

async function startOnce<W extends Workflow>(
  deps: GatewayDeps,
  workflow: W,
  workflowId: string,
  args: Parameters<W>,
  options: StartOptions,
): Promise<StartOutcome> {
  const { temporal } = deps;
  try {
    await admittedStart(deps, options, 'start', (priority) =>
      temporal.client.workflow.start(workflow, {
        taskQueue: temporal.taskQueue,
        workflowId,
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        args,
        ...(options.searchAttributes ? { typedSearchAttributes: options.searchAttributes } : {}),
        ...priority,
        // TypeScript cannot resolve the SDK's conditional `args` type for a generic W;
        // `args: Parameters<W>` in the signature above is what guarantees it.
      } as unknown as WorkflowStartOptions<typeof workflow>),
    );
    return 'enqueued';
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return 'duplicate';
    throw error;
  }
}

async function signalWithStart<W extends Workflow, A extends unknown[]>(
  deps: GatewayDeps,
  workflow: W,
  workflowId: string,
  args: Parameters<W>,
  signal: SignalDefinition<A>,
  signalArgs: A,
  options: SignalOptions,
): Promise<SignalOutcome> {
  const { temporal } = deps;
  try {
    await admittedStart(deps, options, 'signalWithStart', (priority) =>
      temporal.client.workflow.signalWithStart(workflow, {
        taskQueue: temporal.taskQueue,
        workflowId,
        workflowIdReusePolicy: options.reopen ? WorkflowIdReusePolicy.ALLOW_DUPLICATE : WorkflowIdReusePolicy.REJECT_DUPLICATE,
        args,
        signal,
        signalArgs,
        ...(options.searchAttributes ? { typedSearchAttributes: options.searchAttributes } : {}),
        ...priority,
      } as unknown as WorkflowSignalWithStartOptions<A> & WorkflowStartOptions<W>),
    );
    return 'enqueued';
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return 'closed';
    throw error;
  }
}

async function updateWithStart<W extends Workflow, R, A extends unknown[]>(
  deps: GatewayDeps,
  workflow: W,
  workflowId: string,
  args: Parameters<W>,
  update: UpdateDefinition<R, A>,
  updateArgs: A,
  tenancy: Tenancy,
): Promise<UpdateOutcome<R>> {
  return admitted(deps, tenancy, (priority) => updateUntilDecided(deps, workflow, workflowId, args, update, updateArgs, priority));
}

async function updateUntilDecided<W extends Workflow, R, A extends unknown[]>(
  deps: GatewayDeps,
  workflow: W,
  workflowId: string,
  args: Parameters<W>,
  update: UpdateDefinition<R, A>,
  updateArgs: A,
  priority: { priority?: Priority },
): Promise<UpdateOutcome<R>> {
  const { temporal, updateTimeoutMs, metrics } = deps;
  const call = () =>
    temporal.client.workflow.executeUpdateWithStart(update, {
      args: updateArgs,
      startWorkflowOperation: new WithStartWorkflowOperation(workflow, {
        taskQueue: temporal.taskQueue,
        workflowId,
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        args,
        ...priority,
      } as unknown as WorkflowStartOptions<W> & { workflowIdConflictPolicy: 'USE_EXISTING' }),
    });
  const deadline = Date.now() + updateTimeoutMs;
  for (;;) {
    try {
      const result = await temporalCall(temporal, 'updateWithStart', Math.max(1, deadline - Date.now()), call, metrics);
      return { outcome: 'enqueued', result };
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) return { outcome: 'closed' };
      const failure = error instanceof WorkflowUpdateFailedError ? error.cause : undefined;
      // The server's answer when the workflow task that carried the Update ended the execution
      // (completed, or continued as new) without the worker seeing it: nothing was recorded.
      // Asking again reaches the next run, or finds the workflow closed.
      if (failure instanceof ApplicationFailure && failure.type === UNPROCESSED_UPDATE) {
        if (Date.now() < deadline) continue;
        throw errors.unavailable('temporal', error);
      }
      if (failure instanceof ApplicationFailure) return { outcome: 'refused', refusal: failure };
      throw error;
    }
  }
}

export function createIngressGateway(deps: GatewayDeps): IngressGateway {
  return {
    startOnce: (workflow, workflowId, args, options) => startOnce(deps, workflow, workflowId, args, options),
    signalWithStart: (workflow, workflowId, args, signal, signalArgs, options) =>
      signalWithStart(deps, workflow, workflowId, args, signal, signalArgs, options),
    updateWithStart: (workflow, workflowId, args, update, updateArgs, tenancy) =>
      updateWithStart(deps, workflow, workflowId, args, update, updateArgs, tenancy),
    priority: (tenant) => deps.fairness.priority(tenant),
    shedIfSpent: (tenant) => deps.admission.shedIfSpent(tenant),
  };
}

/**
 * Benchmarks only (BENCH_DISABLE_ENQUEUE): everything but the durable hand-off, to measure what
 * durability costs. Its acks are not durable, which is why only src/main/api.ts can choose it.
 */
export function createNoEnqueueGateway(): IngressGateway {
  return {
    startOnce: async () => 'not_enqueued',
    signalWithStart: async () => 'not_enqueued',
    updateWithStart: async () => ({ outcome: 'not_enqueued' }),
    priority: async () => undefined,
    shedIfSpent: () => undefined,
  };
}
