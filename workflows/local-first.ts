/**
 * An activity tried as a local activity first, then, if it still fails once the local bound is
 * spent, as a regular activity.
 *
 * A local activity costs one marker in the history instead of three events, an extra workflow
 * task and a task-queue round trip. Its retries, though, keep the workflow task busy and grow the
 * history, so it is bounded (`scheduleToCloseTimeout`); past that, the regular activity's retries
 * are kept by the server without a history event each, for as long as its own policy says.
 */
import {
  isCancellation,
  proxyActivities,
  proxyLocalActivities,
  type ActivityOptions,
  type LocalActivityOptions,
} from '@temporalio/workflow';
/** A feature's activities as its workflow proxies them, keyed by name. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type ActivityMap = Record<string, (...args: any[]) => Promise<any>>;

type ActivityResult<A extends ActivityMap, K extends keyof A> = Awaited<ReturnType<A[K]>>;

/** An activity called by name: what `localFirst` returns, and `byName` for regular activities only. */
export type ActivityCall<A extends ActivityMap> = <K extends keyof A>(name: K, ...args: Parameters<A[K]>) => Promise<ActivityResult<A, K>>;

/**
 * Local options for a short Postgres effect whose caller retries without bound: 10 s of local
 * attempts (a marker each time the workflow task is extended), then the regular activity.
 */
export const LOCAL_POSTGRES_EFFECT: LocalActivityOptions = {
  startToCloseTimeout: '30s',
  scheduleToCloseTimeout: '10s',
  localRetryThreshold: '1s',
  retry: { initialInterval: '250ms', backoffCoefficient: 2, maximumInterval: '10s' },
};

// The proxies are keyed by name; TypeScript cannot follow one generic key through both kinds.
function on<A extends ActivityMap, K extends keyof A>(proxies: object, name: K) {
  return (proxies as Record<keyof A, unknown>)[name] as (...args: Parameters<A[K]>) => Promise<ActivityResult<A, K>>;
}

/** Regular activities, called the way `localFirst` is: for workflows that chose by patch. */
export function byName<A extends ActivityMap>(options: ActivityOptions): ActivityCall<A> {
  const regulars = proxyActivities<A>(options);
  return <K extends keyof A>(name: K, ...args: Parameters<A[K]>) => on<A, K>(regulars, name)(...args);
}

/** `isFinal`: failures the regular activity would not fix either (they are rethrown at once). */
export function localFirst<A extends ActivityMap>(
  local: LocalActivityOptions,
  regular: ActivityOptions,
  isFinal: (error: unknown) => boolean = () => false,
): ActivityCall<A> {
  const locals = proxyLocalActivities<A>(local);
  const regulars = proxyActivities<A>(regular);
  return async function call<K extends keyof A>(name: K, ...args: Parameters<A[K]>): Promise<ActivityResult<A, K>> {
    try {
      return await on<A, K>(locals, name)(...args);
    } catch (error) {
      if (isCancellation(error) || isFinal(error)) throw error;
      return on<A, K>(regulars, name)(...args);
    }
  };
}
