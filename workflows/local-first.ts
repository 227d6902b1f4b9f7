/**
 * An activity tried as a local activity first, then, if it still fails once the local bound is
 * spent, as a regular activity (issues #15, #17).
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
import type { Activities } from '../activities';

type Result<K extends keyof Activities> = Awaited<ReturnType<Activities[K]>>;

/** An activity called by name: what `localFirst` returns, and `byName` for regular activities only. */
export type ActivityCall = <K extends keyof Activities>(name: K, ...args: Parameters<Activities[K]>) => Promise<Result<K>>;

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
function on<K extends keyof Activities>(proxies: Activities, name: K) {
  return proxies[name] as unknown as (...args: Parameters<Activities[K]>) => Promise<Result<K>>;
}

/** Regular activities, called the way `localFirst` is: for workflows that chose by patch. */
export function byName(options: ActivityOptions): ActivityCall {
  const regulars = proxyActivities<Activities>(options);
  return (name, ...args) => on(regulars, name)(...args);
}

/** `isFinal`: failures the regular activity would not fix either (they are rethrown at once). */
export function localFirst(
  local: LocalActivityOptions,
  regular: ActivityOptions,
  isFinal: (error: unknown) => boolean = () => false,
): ActivityCall {
  const locals = proxyLocalActivities<Activities>(local);
  const regulars = proxyActivities<Activities>(regular);
  return async function call<K extends keyof Activities>(name: K, ...args: Parameters<Activities[K]>): Promise<Result<K>> {
    try {
      return await on(locals, name)(...args);
    } catch (error) {
      if (isCancellation(error) || isFinal(error)) throw error;
      return on(regulars, name)(...args);
    }
  };
}
