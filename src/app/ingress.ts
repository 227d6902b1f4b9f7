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
 *
 * The benchmark-only gateway that skips Temporal is chosen at composition (src/app/compose.ts).
 */
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  type SignalDefinition,
  type Workflow,
  type WorkflowSignalWithStartOptions,
  type WorkflowStartOptions,
} from '@temporalio/client';
import type { Metrics } from './metrics';
import { temporalCall, type TemporalClientHandle } from './temporal/client';

/** `not_enqueued`: only from the benchmark gateway, which acks without Temporal. */
export type StartOutcome = 'enqueued' | 'duplicate' | 'not_enqueued';
export type SignalOutcome = 'enqueued' | 'closed' | 'not_enqueued';

export interface StartOptions {
  /** Known at start, so no upsert command is needed in the workflow (the Web UI filters on them). */
  searchAttributes?: WorkflowStartOptions['typedSearchAttributes'];
}

export interface IngressGateway {
  startOnce<W extends Workflow>(workflow: W, workflowId: string, args: Parameters<W>, options?: StartOptions): Promise<StartOutcome>;
  signalWithStart<W extends Workflow, A extends unknown[]>(
    workflow: W,
    workflowId: string,
    args: Parameters<W>,
    signal: SignalDefinition<A>,
    signalArgs: A,
  ): Promise<SignalOutcome>;
}

export function createIngressGateway(deps: { temporal: TemporalClientHandle; startTimeoutMs: number; metrics: Metrics }): IngressGateway {
  const { temporal, startTimeoutMs, metrics } = deps;
  return {
    async startOnce(workflow, workflowId, args, options = {}) {
      try {
        await temporalCall(
          temporal,
          'start',
          startTimeoutMs,
          () =>
            temporal.client.workflow.start(workflow, {
              taskQueue: temporal.taskQueue,
              workflowId,
              workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
              args,
              ...(options.searchAttributes ? { typedSearchAttributes: options.searchAttributes } : {}),
              // TypeScript cannot resolve the SDK's conditional `args` type for a generic W;
              // `args: Parameters<W>` in the signature above is what guarantees it.
            } as unknown as WorkflowStartOptions<typeof workflow>),
          metrics,
        );
        return 'enqueued';
      } catch (error) {
        if (error instanceof WorkflowExecutionAlreadyStartedError) return 'duplicate';
        throw error;
      }
    },
    async signalWithStart<W extends Workflow, A extends unknown[]>(
      workflow: W,
      workflowId: string,
      args: Parameters<W>,
      signal: SignalDefinition<A>,
      signalArgs: A,
    ) {
      try {
        await temporalCall(
          temporal,
          'signalWithStart',
          startTimeoutMs,
          () =>
            temporal.client.workflow.signalWithStart(workflow, {
              taskQueue: temporal.taskQueue,
              workflowId,
              workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
              args,
              signal,
              signalArgs,
            } as unknown as WorkflowSignalWithStartOptions<A> & WorkflowStartOptions<W>),
          metrics,
        );
        return 'enqueued';
      } catch (error) {
        if (error instanceof WorkflowExecutionAlreadyStartedError) return 'closed';
        throw error;
      }
    },
  };
}

/**
 * Benchmarks only (BENCH_DISABLE_ENQUEUE): everything but the durable hand-off, to measure what
 * durability costs. Its acks are not durable, which is why only compose.ts can choose it.
 */
export function createNoEnqueueGateway(): IngressGateway {
  return {
    startOnce: async () => 'not_enqueued',
    signalWithStart: async () => 'not_enqueued',
  };
}
