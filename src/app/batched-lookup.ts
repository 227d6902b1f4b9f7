/**
 * Lookups of keys a process has not seen yet (a credential it never verified, a Slack connection
 * whose secret it has not cached), folded into a few database queries however many arrive.
 *
 * A forged request carries such a key, and each one would otherwise cost a query of its own. Here
 * at most `concurrency` queries run at once; keys that arrive meanwhile wait for the next one,
 * which takes up to `maxBatch` of them. A flood of forgeries therefore costs a bounded number of
 * queries in flight, while a valid key that arrives in the middle of it waits for one query
 * instead of being refused. With no flood, a key is looked up at once, on its own.
 */
import { errors } from './errors';

export interface BatchedLookupOptions {
  /** Queries in flight at most. */
  concurrency: number;
  /** Keys one query takes at most. */
  maxBatch: number;
  /** Keys waiting at most; past it a lookup is answered 503 `busy` (the process is flooded). */
  maxWaiting: number;
}

/** Looks up one key; resolves to its value, or undefined when the key does not exist. */
export type BatchedLookup<V> = (key: string) => Promise<V | undefined>;

interface Waiter<V> {
  resolve: (value: V | undefined) => void;
  reject: (error: unknown) => void;
}

/** `fetch` answers the keys it found; a key it leaves out does not exist. */
export function createBatchedLookup<V>(
  fetch: (keys: string[]) => Promise<Map<string, V>>,
  options: BatchedLookupOptions,
): BatchedLookup<V> {
  // Waiting keys in arrival order; a key asked twice while it waits is fetched once.
  const waiting = new Map<string, Waiter<V>[]>();
  let waiters = 0;
  let inFlight = 0;

  const run = async (batch: Map<string, Waiter<V>[]>) => {
    inFlight += 1;
    try {
      const found = await fetch([...batch.keys()]);
      for (const [key, list] of batch) for (const waiter of list) waiter.resolve(found.get(key));
    } catch (error) {
      for (const list of batch.values()) for (const waiter of list) waiter.reject(error);
    } finally {
      inFlight -= 1;
      pump();
    }
  };

  function pump(): void {
    while (inFlight < options.concurrency && waiting.size > 0) {
      const batch = new Map<string, Waiter<V>[]>();
      for (const [key, list] of waiting) {
        if (batch.size >= options.maxBatch) break;
        batch.set(key, list);
        waiting.delete(key);
        waiters -= list.length;
      }
      void run(batch);
    }
  }

  return (key) =>
    new Promise<V | undefined>((resolve, reject) => {
      if (waiters >= options.maxWaiting) {
        reject(errors.lookupsBusy());
        return;
      }
      const list = waiting.get(key);
      if (list) list.push({ resolve, reject });
      else waiting.set(key, [{ resolve, reject }]);
      waiters += 1;
      pump();
    });
}
