/**
 * An activity tried as a local activity first, then, if it still fails once the local bound is
 * spent, as a regular activity (issues #15, #17).
 *
 * A local activity costs one marker in the history instead of three events, an extra workflow
 * task and a task-queue round trip. Its retries, though, keep the workflow task busy and grow the
 * history, so it is bounded (`scheduleToCloseTimeout`); past that, the regular activity's retries
 * are kept by the server without a history event each, for as long as its own policy says.
 */
import { isCancellation, proxyActivities, proxyLocalActivities, type ActivityOptions, type LocalActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities';

type Result<K extends keyof Activities> = Awaited<ReturnType<Activities[K]>>;

/** `isFinal`: failures the regular activity would not fix either (they are rethrown at once). */
export function localFirst(local: LocalActivityOptions, regular: ActivityOptions, isFinal: (error: unknown) => boolean = () => false) {
  const locals = proxyLocalActivities<Activities>(local);
  const regulars = proxyActivities<Activities>(regular);
  // The proxies are keyed by name; TypeScript cannot follow one generic key through both.
  const on = <K extends keyof Activities>(proxies: typeof locals, name: K) => proxies[name] as unknown as (...args: Parameters<Activities[K]>) => Promise<Result<K>>;
  return async function call<K extends keyof Activities>(name: K, ...args: Parameters<Activities[K]>): Promise<Result<K>> {
    try {
      return await on(locals, name)(...args);
    } catch (error) {
      if (isCancellation(error) || isFinal(error)) throw error;
      return on(regulars, name)(...args);
    }
  };
}
