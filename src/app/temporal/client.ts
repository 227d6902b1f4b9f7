import {
  Client,
  Connection,
  defaultGrpcRetryOptions,
  makeGrpcRetryInterceptor,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  ValueError,
} from '@temporalio/client';
import { status as grpcStatus } from '@grpc/grpc-js';
import { AppError, errors } from '../errors';
import type { Metrics } from '../metrics';

export interface TemporalClientHandle {
  connection: Connection;
  client: Client;
  taskQueue: string;
  namespace: string;
  /** Calls that `temporalCall` gave up on but gRPC may still be retrying (see close()). */
  inFlight: Set<Promise<unknown>>;
  close(): Promise<void>;
}

/**
 * A lazy connection: the API starts even while Temporal is down, and the gRPC channel
 * reconnects by itself once Temporal is back, so no API restart is needed after an outage.
 */
export function createTemporalClient(options: { address: string; namespace: string; taskQueue: string }): TemporalClientHandle {
  const retries = retryTracker();
  const connection = Connection.lazy({
    address: options.address,
    connectTimeout: 2000,
    // gRPC's default reconnect backoff grows to minutes; after an outage we want the API acking
    // again within a couple of seconds of Temporal's return.
    channelArgs: { 'grpc.initial_reconnect_backoff_ms': 200, 'grpc.max_reconnect_backoff_ms': 2000 },
    interceptors: [retries.interceptor],
  });
  const client = new Client({ connection, namespace: options.namespace });
  const inFlight = new Set<Promise<unknown>>();
  return {
    connection,
    client,
    taskQueue: options.taskQueue,
    namespace: options.namespace,
    inFlight,
    // A call abandoned by temporalCall's timer may still have a gRPC retry scheduled; closing the
    // channel under it makes that retry throw from a timer. Each call is deadline-bounded, so
    // waiting for them is bounded too; so is the wait for retries already on their timers.
    close: async () => {
      retries.stop();
      await Promise.allSettled([...inFlight]);
      await retries.settled();
      await connection.close();
    },
  };
}

/**
 * The SDK's own gRPC retries (the same backoff), told to schedule no more once the connection is
 * closing, and knowing when the last scheduled one fires: the SDK's retry timer calls into the
 * channel, which throws from that timer (out of anyone's reach) once the channel is closed.
 */
function retryTracker() {
  const sdk = defaultGrpcRetryOptions();
  let stopped = false;
  let lastFiresAt = 0;
  const interceptor = makeGrpcRetryInterceptor({
    retryableDecider: (attempt, status) => !stopped && sdk.retryableDecider(attempt, status),
    delayFunction: (attempt, status) => {
      const delay = sdk.delayFunction(attempt, status);
      lastFiresAt = Math.max(lastFiresAt, Date.now() + delay);
      return delay;
    },
  });
  return {
    interceptor,
    stop: () => (stopped = true),
    /** Resolves once every retry already scheduled has started its call (a few seconds at most: the SDK's backoff caps at 5 s). */
    settled: async () => {
      const wait = lastFiresAt - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait + 20));
    },
  };
}

/** gRPC codes that are answers about the request, not signs that Temporal is unreachable. */
const DEFINITE_CODES = new Set<number>([
  grpcStatus.INVALID_ARGUMENT,
  grpcStatus.NOT_FOUND,
  grpcStatus.ALREADY_EXISTS,
  grpcStatus.FAILED_PRECONDITION,
  grpcStatus.PERMISSION_DENIED,
]);

function isDefiniteAnswer(error: unknown): boolean {
  if (error instanceof WorkflowExecutionAlreadyStartedError || error instanceof WorkflowNotFoundError) return true;
  // The workflow's own answer to an Update (a validator's refusal, a handler's failure).
  if (error instanceof WorkflowUpdateFailedError) return true;
  if (error instanceof AppError) return true;
  const code = (error as { code?: unknown; cause?: { code?: unknown } })?.code ?? (error as { cause?: { code?: unknown } })?.cause?.code;
  return typeof code === 'number' && DEFINITE_CODES.has(code);
}

/**
 * The data converter could not serialise the call (ValueError, PayloadConverterError) or code on
 * the way overflowed its stack (RangeError): a bug in what we send, never a sign of an outage.
 */
export function isConversionFailure(error: unknown): boolean {
  let at: unknown = error;
  for (let hops = 0; at instanceof Error && hops < 5; hops++, at = at.cause) {
    if (at instanceof ValueError || at instanceof RangeError) return true;
  }
  return false;
}

/** One Temporal call's name (in the timeout's message and the error metric), its bound, and where errors are counted. */
export interface TemporalCallOptions {
  operation: string;
  timeoutMs: number;
  metrics?: Metrics;
}

/**
 * Runs one Temporal call under a deadline. A definite answer (already started, not found…)
 * is rethrown for the caller to interpret, and so is a conversion failure (a bug: 500); anything
 * else means Temporal could not durably take the request in time, which is a 503 so that the
 * sender retries. Never an ack.
 */
export async function temporalCall<T>(
  temporal: TemporalClientHandle,
  { operation, timeoutMs, metrics }: TemporalCallOptions,
  fn: () => Promise<T>,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  // withDeadline bounds the RPC, but not the lazy connection's (re)connect that precedes it,
  // so a hard timer bounds the whole call: Slack's 3 s ack window leaves no room to overrun.
  // If the call still lands after we gave up, the sender's retry meets the same workflow id.
  const hardTimeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Temporal did not answer ${operation} within ${timeoutMs} ms`)), timeoutMs);
  });
  const call = temporal.connection.withDeadline(Date.now() + timeoutMs, fn);
  temporal.inFlight.add(call);
  void call.then(
    () => temporal.inFlight.delete(call),
    () => temporal.inFlight.delete(call),
  );
  try {
    return await Promise.race([call, hardTimeout]);
  } catch (error) {
    // Rethrown as they are: the error mapper answers a conversion failure 500 and logs it as a bug.
    if (isDefiniteAnswer(error) || isConversionFailure(error)) throw error;
    metrics?.temporalErrors.inc({ operation, kind: (error as Error)?.name ?? 'unknown' });
    throw errors.unavailable('temporal', error);
  } finally {
    clearTimeout(timer);
  }
}

/** Temporal's own answer to "is it there?", bounded, for /ready. */
export async function pingTemporal(temporal: TemporalClientHandle, timeoutMs = 2000): Promise<void> {
  await temporal.connection.withDeadline(Date.now() + timeoutMs, () => temporal.connection.workflowService.getSystemInfo({}));
}
