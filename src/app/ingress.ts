/**
 * The ingress gateway: the one way any code of the service talks to Temporal's workflows, in the
 * API, the worker's activities and `den` alike. A feature names the workflow by its contract's
 * ref (src/app/temporal/contract.ts) and passes one options object per call; the client itself
 * stays in here (ESLint forbids `client.workflow` anywhere else).
 *
 * "An ack means durable": a route answers 2xx only after Temporal holds the work. Every call is
 * bounded (temporalCall): an outage, or no answer in time, is a coded 503 so the sender retries,
 * never an ack. The workflow id is the dedupe key:
 * - `start` starts a workflow unless its id exists or existed (REJECT_DUPLICATE, which holds for
 *   the namespace retention): a provider's retry of a delivery, even one racing the first, is a
 *   `duplicate`.
 * - `signalWithStart` delivers a signal, starting the workflow on the first one (conflict policy
 *   USE_EXISTING). REJECT_DUPLICATE keeps a late signal from reviving a finished workflow: that
 *   is `closed`. Only an actor that closes when idle and must start again on the next signal (a
 *   GitHub target's) asks for `reopen`, which is ALLOW_DUPLICATE (startPolicy).
 * - `updateWithStart` is the same with an Update, for work the workflow must decide on before the
 *   ack: the answer waits for a worker to run the Update's validator. A refusal comes back as
 *   `refused` with the validator's ApplicationFailure; nothing was recorded. Bounded by
 *   TEMPORAL_UPDATE_TIMEOUT, longer than a start because a worker must answer too.
 * - `execute` starts a workflow and waits for its result (MCP resolve, `den github reconcile`).
 * - `signal`, `executeUpdate` and `startUpdate` reach a workflow that runs; `query` and
 *   `describe` read one. A workflow Temporal does not know is an answer (`not_found`,
 *   undefined), not an error.
 *
 * Every start names its tenant (the organization, or for a GitHub delivery that matches none its
 * installation) and how it takes admission (src/app/admission.ts): the call waits for or is shed
 * by its tenant's admission, a refusal reaches its sender in its own shape (`shedAs`), and the
 * workflow carries the tenant as its fairness key (src/app/temporal/fairness.ts).
 *
 * The benchmark-only gateway that skips the durable hand-off is chosen at composition (src/main/api.ts).
 */
import {
  ApplicationFailure,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateStage,
  type QueryDefinition,
  type SignalDefinition,
  type UpdateDefinition,
  type WorkflowExecutionDescription,
  type WorkflowHandle,
  type WorkflowSignalWithStartOptions,
  type WorkflowStartOptions,
} from '@temporalio/client';
import type { Priority } from '@temporalio/common';
import { reshapeShed, type AdmissionGate, type AdmissionMode, type ShedAnswer } from './admission';
import { errors } from './errors';
import type { Metrics } from './metrics';
import { temporalCall, type TemporalCallOptions, type TemporalClientHandle } from './temporal/client';
import type { WorkflowRef } from './temporal/contract';
import type { Fairness } from './temporal/fairness';

/** `not_enqueued`: only from the benchmark gateway, which acks without Temporal. */
export type StartOutcome = 'enqueued' | 'duplicate' | 'not_enqueued';
export type SignalOutcome = 'enqueued' | 'closed' | 'not_enqueued';
export type UpdateOutcome<R> =
  { outcome: 'enqueued'; result: R } | { outcome: 'refused'; refusal: ApplicationFailure } | { outcome: 'closed' | 'not_enqueued' };
/** What an Update sent to a running workflow came to. */
export type UpdateAnswer<R> =
  { outcome: 'done'; result: R } | { outcome: 'refused'; refusal: ApplicationFailure } | { outcome: 'not_found' };

/** The server's failure type for an Update the worker never saw (see updateUntilDecided). */
const UNPROCESSED_UPDATE = 'UnprocessedUpdate';

/** Whose work a start is, how it takes admission, and how admission's refusal reaches its sender. */
export interface Tenancy {
  /** The organization id, or another stable key when no organization is known (at most 64 bytes). */
  tenant: string;
  admission: AdmissionMode;
  /** Default: the API's 429 with Retry-After. */
  shedAs?: ShedAnswer;
}

/** A workflow to start, by its contract's ref. */
export interface StartRequest<A extends unknown[], R> {
  workflow: WorkflowRef<A, R>;
  id: string;
  args: A;
  tenancy: Tenancy;
  /** Known at start, so no upsert command is needed in the workflow (the Web UI filters on them). */
  searchAttributes?: WorkflowStartOptions['typedSearchAttributes'];
  /** Temporal's priority key (1 is the highest; unset, the server's default 3), beside the tenant's fairness key. */
  priorityKey?: number;
  /** A shorter bound than TEMPORAL_START_TIMEOUT for this call (a heartbeat that must land before a lease ends). */
  maxTimeoutMs?: number;
}

export interface SignalWithStartRequest<A extends unknown[], R, S extends unknown[]> extends StartRequest<A, R> {
  signal: SignalDefinition<S>;
  signalArgs: S;
  /** For an actor that closes when idle: a closed workflow of the id is started anew instead of answering `closed`. */
  reopen?: boolean;
}

export interface UpdateWithStartRequest<A extends unknown[], R, U, UA extends unknown[]> extends StartRequest<A, R> {
  update: UpdateDefinition<U, UA>;
  updateArgs: UA;
}

export interface ExecuteRequest<A extends unknown[], R> extends StartRequest<A, R> {
  /** Another task queue than the process's own (MCP resolve polls one of its own). */
  taskQueue?: string;
  /** How long to wait for the result; the workflow itself is given a little longer to finish. */
  timeoutMs: number;
}

/** A running workflow, by id; `timeoutMs` overrides the gateway's bound for this call. */
interface Reach {
  id: string;
  timeoutMs?: number;
}

export interface IngressGateway {
  start<A extends unknown[], R>(request: StartRequest<A, R>): Promise<StartOutcome>;
  signalWithStart<A extends unknown[], R, S extends unknown[]>(request: SignalWithStartRequest<A, R, S>): Promise<SignalOutcome>;
  updateWithStart<A extends unknown[], R, U, UA extends unknown[]>(request: UpdateWithStartRequest<A, R, U, UA>): Promise<UpdateOutcome<U>>;
  execute<A extends unknown[], R>(request: ExecuteRequest<A, R>): Promise<R>;
  signal<S extends unknown[]>(request: Reach & { signal: SignalDefinition<S>; args: S }): Promise<'enqueued' | 'not_found'>;
  /** The Update's result, once the workflow has run its handler. */
  executeUpdate<U, UA extends unknown[]>(request: Reach & { update: UpdateDefinition<U, UA>; args: UA }): Promise<UpdateAnswer<U>>;
  /**
   * The Update accepted or refused by its validator, without waiting for its handler to finish.
   * With `updateId`, the same request sent again is the same Update (Temporal dedupes it by id).
   */
  startUpdate<U, UA extends unknown[]>(
    request: Reach & { update: UpdateDefinition<U, UA>; args: UA; updateId?: string },
  ): Promise<{ outcome: 'accepted' } | Exclude<UpdateAnswer<U>, { outcome: 'done' }>>;
  /** The query's answer, or undefined for a workflow Temporal does not know. */
  query<R, QA extends unknown[]>(request: Reach & { query: QueryDefinition<R, QA>; args: QA }): Promise<R | undefined>;
  describe(request: Reach): Promise<WorkflowExecutionDescription | undefined>;
  /**
   * Throws admission's refusal, in the sender's shape, when this process knows the tenant's share
   * of the moment is spent (no I/O): a route calls it before its own Postgres work.
   */
  shedIfSpent(tenancy: Tenancy): void;
}

export interface GatewayDeps {
  temporal: TemporalClientHandle;
  /** TEMPORAL_START_TIMEOUT: every call but an Update's and an `execute`'s. */
  startTimeoutMs: number;
  /** TEMPORAL_UPDATE_TIMEOUT. */
  updateTimeoutMs: number;
  fairness: Fairness;
  admission: AdmissionGate;
  metrics?: Metrics;
}

/** The id reuse policy of a start: REJECT_DUPLICATE, but ALLOW_DUPLICATE for an actor that reopens. */
export function startPolicy(request: { reopen?: boolean }): WorkflowIdReusePolicy {
  return request.reopen ? WorkflowIdReusePolicy.ALLOW_DUPLICATE : WorkflowIdReusePolicy.REJECT_DUPLICATE;
}

/** Whose start it is (admission's tenant, and how a refusal is shaped), and the priority key it carries. */
type Admittance = Pick<StartRequest<unknown[], unknown>, 'tenancy' | 'priorityKey'>;

/** Runs one start under the tenant's admission, with the priority it carries; a refusal in the sender's shape. */
async function admitted<T>(
  deps: GatewayDeps,
  { tenancy, priorityKey }: Admittance,
  call: (priority: { priority?: Priority }) => Promise<T>,
): Promise<T> {
  let ticket;
  try {
    ticket = await deps.admission.admit(tenancy.tenant, tenancy.admission);
  } catch (error) {
    throw reshapeShed(error, tenancy.shedAs);
  }
  try {
    const fair = await deps.fairness.priority(tenancy.tenant);
    const priority = priorityKey === undefined ? fair : { ...fair, priorityKey };
    return await call(priority ? { priority } : {});
  } finally {
    ticket.release();
  }
}

/** The options every start shares: queue, id, policy, arguments, search attributes, priority. */
function startOptions<A extends unknown[], R>(
  deps: GatewayDeps,
  request: StartRequest<A, R> & { reopen?: boolean; taskQueue?: string },
  priority: { priority?: Priority },
): WorkflowStartOptions {
  return {
    taskQueue: request.taskQueue ?? deps.temporal.taskQueue,
    workflowId: request.id,
    workflowIdReusePolicy: startPolicy(request),
    args: request.args,
    ...(request.searchAttributes ? { typedSearchAttributes: request.searchAttributes } : {}),
    ...priority,
  };
}

/** A start as the gateway sends it: the operation's name (for the timeout and the metric), and the request. */
interface StartCall<A extends unknown[], R> {
  operation: string;
  request: StartRequest<A, R>;
}

function startCall<A extends unknown[], R, T>(
  deps: GatewayDeps,
  { operation, request }: StartCall<A, R>,
  call: (priority: { priority?: Priority }) => Promise<T>,
): Promise<T> {
  const timeoutMs = Math.min(deps.startTimeoutMs, request.maxTimeoutMs ?? Number.POSITIVE_INFINITY);
  return admitted(deps, request, (priority) =>
    temporalCall(deps.temporal, { operation, timeoutMs, metrics: deps.metrics }, () => call(priority)),
  );
}

async function start<A extends unknown[], R>(deps: GatewayDeps, request: StartRequest<A, R>): Promise<StartOutcome> {
  try {
    await startCall(deps, { operation: 'start', request }, (priority) =>
      deps.temporal.client.workflow.start(request.workflow.workflowType, startOptions(deps, request, priority)),
    );
    return 'enqueued';
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return 'duplicate';
    throw error;
  }
}

async function signalWithStart<A extends unknown[], R, S extends unknown[]>(
  deps: GatewayDeps,
  request: SignalWithStartRequest<A, R, S>,
): Promise<SignalOutcome> {
  try {
    await startCall(deps, { operation: 'signalWithStart', request }, (priority) =>
      deps.temporal.client.workflow.signalWithStart(request.workflow.workflowType, {
        ...startOptions(deps, request, priority),
        signal: request.signal,
        signalArgs: request.signalArgs,
        // The SDK's conditional option types cannot be resolved for generic arguments; the request's
        // types (the contract's ref and the signal's definition) are what guarantee them.
      } as unknown as WorkflowSignalWithStartOptions<S> & WorkflowStartOptions),
    );
    return 'enqueued';
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return 'closed';
    throw error;
  }
}

/**
 * The Update with its start, until a worker decided it or the bound passed. An Update the worker
 * never saw (the workflow task that carried it ended the execution: completed, or continued as new)
 * recorded nothing, so it is asked again: it reaches the next run, or finds the workflow closed.
 */
async function updateUntilDecided<A extends unknown[], R, U, UA extends unknown[]>(
  deps: GatewayDeps,
  request: UpdateWithStartRequest<A, R, U, UA>,
  priority: { priority?: Priority },
): Promise<UpdateOutcome<U>> {
  const { temporal, updateTimeoutMs, metrics } = deps;
  const call = () =>
    temporal.client.workflow.executeUpdateWithStart(request.update, {
      args: request.updateArgs,
      startWorkflowOperation: new WithStartWorkflowOperation(request.workflow.workflowType, {
        ...startOptions(deps, request, priority),
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
  const deadline = Date.now() + updateTimeoutMs;
  for (;;) {
    try {
      const result = await temporalCall(
        temporal,
        { operation: 'updateWithStart', timeoutMs: Math.max(1, deadline - Date.now()), metrics },
        call,
      );
      return { outcome: 'enqueued', result };
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) return { outcome: 'closed' };
      const failure = updateRefusal(error);
      if (failure?.type === UNPROCESSED_UPDATE) {
        if (Date.now() < deadline) continue;
        throw errors.unavailable('temporal', error);
      }
      if (failure) return { outcome: 'refused', refusal: failure };
      throw error;
    }
  }
}

/**
 * The workflow's own refusal of an Update (its validator's ApplicationFailure), or undefined.
 * A workflow whose code has no handler for the Update (a worker of an older release, during a
 * rolling deploy) answers with the SDK's own refusal: that is an outage of the moment, a 503 to
 * retry once the new workers take over, never the workflow's answer.
 */
function updateRefusal(error: unknown): ApplicationFailure | undefined {
  const failure = error instanceof WorkflowUpdateFailedError ? error.cause : undefined;
  if (!(failure instanceof ApplicationFailure)) return undefined;
  if (failure.message.startsWith('No registered handler for update')) throw errors.unavailable('temporal', failure);
  return failure;
}

/** One call to a running workflow: the operation's name and its bound (the gateway's metrics count its errors). */
type ReachCall = Omit<TemporalCallOptions, 'metrics'>;

/** One call to a workflow that runs; a workflow Temporal does not know is `not_found`. */
async function reach<T>(deps: GatewayDeps, bound: ReachCall, call: () => Promise<T>): Promise<T | typeof NOT_FOUND> {
  try {
    return await temporalCall(deps.temporal, { ...bound, metrics: deps.metrics }, call);
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return NOT_FOUND;
    throw error;
  }
}
const NOT_FOUND = Symbol('not found');

async function updateAnswer<U>(deps: GatewayDeps, bound: ReachCall, call: () => Promise<U>): Promise<UpdateAnswer<U>> {
  try {
    const result = await reach(deps, bound, call);
    return result === NOT_FOUND ? { outcome: 'not_found' } : { outcome: 'done', result };
  } catch (error) {
    const refusal = updateRefusal(error);
    if (refusal) return { outcome: 'refused', refusal };
    throw error;
  }
}

/** How long the workflow `execute` starts may run: its caller's wait, and a little more, so none is left behind. */
const EXECUTION_SLACK_MS = 5_000;

/** A workflow's Update calls with the arguments its definition names (the SDK's types want a non-empty tuple). */
function updates(handle: WorkflowHandle) {
  return {
    execute: <U>(update: UpdateDefinition<U, never>, args: unknown[]) =>
      handle.executeUpdate(update as UpdateDefinition<U, [unknown]>, { args: args as [unknown] }),
    /** Answers once the validator accepted the Update (or throws its refusal), not when its handler ends. */
    accept: <U>(update: UpdateDefinition<U, never>, args: unknown[], updateId?: string) =>
      handle.startUpdate(update as UpdateDefinition<U, [unknown]>, {
        args: args as [unknown],
        waitForStage: WorkflowUpdateStage.ACCEPTED,
        ...(updateId === undefined ? {} : { updateId }),
      }),
  };
}

export function createIngressGateway(deps: GatewayDeps): IngressGateway {
  const handle = (id: string) => deps.temporal.client.workflow.getHandle(id);
  return {
    start: (request) => start(deps, request),
    signalWithStart: (request) => signalWithStart(deps, request),
    updateWithStart: (request) => admitted(deps, request, (priority) => updateUntilDecided(deps, request, priority)),
    // An execute is admitted by its tenancy alone: it carries no priority key to Temporal.
    execute: (request) =>
      admitted(deps, { tenancy: request.tenancy }, (priority) =>
        temporalCall(
          deps.temporal,
          { operation: 'execute', timeoutMs: request.timeoutMs, metrics: deps.metrics },
          () =>
            deps.temporal.client.workflow.execute(request.workflow.workflowType, {
              ...startOptions(deps, request, priority),
              workflowExecutionTimeout: request.timeoutMs + EXECUTION_SLACK_MS,
            }) as Promise<never>,
        ),
      ),
    signal: async ({ id, signal, args, timeoutMs }) =>
      (await reach(deps, { operation: 'signal', timeoutMs: timeoutMs ?? deps.startTimeoutMs }, () =>
        handle(id).signal(signal, ...args),
      )) === NOT_FOUND
        ? 'not_found'
        : 'enqueued',
    executeUpdate: ({ id, update, args, timeoutMs }) =>
      updateAnswer(deps, { operation: 'executeUpdate', timeoutMs: timeoutMs ?? deps.updateTimeoutMs }, () =>
        updates(handle(id)).execute(update as UpdateDefinition<never, never>, args),
      ),
    startUpdate: async ({ id, update, args, timeoutMs, updateId }) => {
      const answer = await updateAnswer(deps, { operation: 'startUpdate', timeoutMs: timeoutMs ?? deps.updateTimeoutMs }, () =>
        updates(handle(id)).accept(update as UpdateDefinition<never, never>, args, updateId),
      );
      return answer.outcome === 'done' ? { outcome: 'accepted' } : answer;
    },
    query: async ({ id, query, args, timeoutMs }) => {
      const answer = await reach(deps, { operation: 'query', timeoutMs: timeoutMs ?? deps.startTimeoutMs }, () =>
        handle(id).query(query, ...args),
      );
      return answer === NOT_FOUND ? undefined : answer;
    },
    describe: async ({ id, timeoutMs }) => {
      const answer = await reach(deps, { operation: 'describe', timeoutMs: timeoutMs ?? deps.startTimeoutMs }, () => handle(id).describe());
      return answer === NOT_FOUND ? undefined : answer;
    },
    shedIfSpent: (tenancy) => {
      try {
        deps.admission.shedIfSpent(tenancy.tenant);
      } catch (error) {
        throw reshapeShed(error, tenancy.shedAs);
      }
    },
  };
}

/**
 * Benchmarks only (BENCH_DISABLE_ENQUEUE): everything but the durable hand-off, to measure what
 * durability costs. Its acks are not durable, which is why only src/main/api.ts can choose it.
 */
export function createNoEnqueueGateway(gateway: IngressGateway): IngressGateway {
  return {
    ...gateway,
    start: async () => 'not_enqueued',
    signalWithStart: async () => 'not_enqueued',
    updateWithStart: async () => ({ outcome: 'not_enqueued' }),
    shedIfSpent: () => undefined,
  };
}
