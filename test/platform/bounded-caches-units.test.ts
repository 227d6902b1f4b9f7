/** The bounded caches (src/app/bounded-caches.ts), on an injected clock. */
import { boundedCache, createRecentSet, createUnknownCache, type AuthCacheSettings } from '../../src/app/bounded-caches';

const settings: AuthCacheSettings = { maxKeys: 100, unknownTtlMs: 5_000 };

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('unknown cache', () => {
  it('remembers a key for unknownTtlMs, and nothing when the TTL is 0', () => {
    const c = clock();
    const cache = createUnknownCache(settings, c.now);
    expect(cache.has('x')).toBe(false);
    cache.add('x');
    c.advance(5_000);
    expect(cache.has('x')).toBe(true);
    c.advance(1);
    expect(cache.has('x')).toBe(false);
    const off = createUnknownCache({ ...settings, unknownTtlMs: 0 }, c.now);
    off.add('x');
    expect(off.has('x')).toBe(false);
  });

  it('holds at most maxKeys keys', () => {
    const cache = createUnknownCache(settings, clock().now);
    for (let i = 0; i < 1000; i++) cache.add(`k${i}`);
    expect(cache.size).toBe(100);
    expect(cache.has('k0')).toBe(false);
    expect(cache.has('k999')).toBe(true);
    cache.delete('k999');
    expect(cache.has('k999')).toBe(false);
  });
});

describe('recent set', () => {
  it('keeps the most recently added keys', () => {
    const set = createRecentSet(2);
    set.add('a');
    set.add('b');
    set.add('a');
    set.add('c');
    expect([set.has('a'), set.has('b'), set.has('c')]).toEqual([true, false, true]);
    set.delete('a');
    expect(set.has('a')).toBe(false);
  });
});

describe('bounded cache', () => {
  it('drops the least recently used value, where reading a value counts as a use', () => {
    const cache = boundedCache<number>({ max: 2 });
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1);
    cache.set('c', 3);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([1, undefined, 3]);
    expect(cache.size).toBe(2);
    cache.delete('a');
    expect(cache.get('a')).toBeUndefined();
  });

  it('forgets a value once more than ttlMs passed since it was set, on the injected clock; setting it again starts over', () => {
    const c = clock();
    const cache = boundedCache<string>({ max: 10, ttlMs: 30_000, now: c.now });
    cache.set('k', 'v');
    c.advance(30_000);
    expect(cache.get('k')).toBe('v');
    cache.set('k', 'w');
    c.advance(30_000);
    expect(cache.get('k')).toBe('w');
    c.advance(1);
    expect(cache.get('k')).toBeUndefined();
  });
});
