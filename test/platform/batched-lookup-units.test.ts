/** The batched lookup (src/app/batched-lookup.ts): few queries in flight however many keys arrive, and every waiter answered. */
import { AppError } from '../../src/app/errors';
import { createBatchedLookup } from '../../src/app/batched-lookup';

/** A fetch whose queries the test completes by hand, recording the keys each one asked for. */
function manualFetch(known: Set<string>) {
  const queries: { keys: string[]; finish: () => void; fail: (error: Error) => void }[] = [];
  const fetch = (keys: string[]) =>
    new Promise<Map<string, string>>((resolve, reject) => {
      queries.push({
        keys,
        finish: () => resolve(new Map(keys.filter((k) => known.has(k)).map((k) => [k, `value of ${k}`]))),
        fail: reject,
      });
    });
  return { fetch, queries };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('createBatchedLookup', () => {
  it('looks a lone key up at once, on its own', async () => {
    const { fetch, queries } = manualFetch(new Set(['a']));
    const lookup = createBatchedLookup(fetch, { concurrency: 2, maxBatch: 10, maxWaiting: 100 });
    const found = lookup('a');
    expect(queries.map((q) => q.keys)).toEqual([['a']]);
    queries[0]!.finish();
    expect(await found).toBe('value of a');
  });

  it('keeps at most `concurrency` queries in flight, folding the keys that wait into the next ones', async () => {
    const { fetch, queries } = manualFetch(new Set(['k7', 'valid']));
    const lookup = createBatchedLookup(fetch, { concurrency: 2, maxBatch: 4, maxWaiting: 100 });
    const answers = [...Array(10).keys()].map((i) => lookup(`k${i}`));
    const valid = lookup('valid');
    const again = lookup('k9');
    expect(queries.map((q) => q.keys)).toEqual([['k0'], ['k1']]);
    queries[0]!.finish();
    await flush();
    // The next query takes up to maxBatch waiting keys; a key asked twice is asked once.
    expect(queries.map((q) => q.keys)).toEqual([['k0'], ['k1'], ['k2', 'k3', 'k4', 'k5']]);
    queries[1]!.finish();
    await flush();
    queries[2]!.finish();
    await flush();
    expect(queries.slice(3).map((q) => q.keys)).toEqual([['k6', 'k7', 'k8', 'k9'], ['valid']]);
    queries[3]!.finish();
    queries[4]!.finish();
    expect(await Promise.all(answers)).toEqual([...Array(10).keys()].map((i) => (i === 7 ? 'value of k7' : undefined)));
    expect(await valid).toBe('value of valid');
    expect(await again).toBeUndefined();
    expect(queries).toHaveLength(5);
  });

  it('fails every waiter of a failed query, and goes on with the next', async () => {
    const { fetch, queries } = manualFetch(new Set(['b']));
    const lookup = createBatchedLookup(fetch, { concurrency: 1, maxBatch: 10, maxWaiting: 100 });
    const first = lookup('a');
    const second = lookup('b');
    queries[0]!.fail(new Error('postgres is down'));
    await expect(first).rejects.toThrow('postgres is down');
    await flush();
    queries[1]!.finish();
    expect(await second).toBe('value of b');
  });

  it('answers 503 busy past maxWaiting keys waiting, and takes keys again once they drain', async () => {
    const { fetch, queries } = manualFetch(new Set());
    const lookup = createBatchedLookup(fetch, { concurrency: 1, maxBatch: 10, maxWaiting: 3 });
    const held = [lookup('a'), lookup('b'), lookup('c'), lookup('d')];
    const refused = lookup('e');
    await expect(refused).rejects.toBeInstanceOf(AppError);
    await expect(refused).rejects.toMatchObject({ status: 503, code: 'busy' });
    queries[0]!.finish();
    await flush();
    queries[1]!.finish();
    expect(await Promise.all(held)).toEqual([undefined, undefined, undefined, undefined]);
    const later = lookup('f');
    queries[2]!.finish();
    expect(await later).toBeUndefined();
  });
});
