/** The pure failure limiter and negative cache (src/app/failure-limit.ts), on an injected clock. */
import { createFailureLimiter, createRecentSet, createUnknownCache, type FailureLimitSettings } from '../../src/app/failure-limit';

const settings: FailureLimitSettings = { maxFailures: 3, windowMs: 10_000, maxKeys: 100, unknownTtlMs: 5_000 };

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('failure limiter', () => {
  it('refuses a key after maxFailures failures until its window ends, with the seconds left', () => {
    const c = clock();
    const limiter = createFailureLimiter(settings, c.now);
    for (let i = 0; i < 3; i++) {
      expect(limiter.retryAfterSeconds('a')).toBe(0);
      limiter.fail('a');
    }
    expect(limiter.retryAfterSeconds('a')).toBe(10);
    c.advance(8_500);
    expect(limiter.retryAfterSeconds('a')).toBe(2);
    c.advance(1_500);
    expect(limiter.retryAfterSeconds('a')).toBe(0);
    limiter.fail('a');
    expect(limiter.retryAfterSeconds('a')).toBe(0);
  });

  it('counts each key apart', () => {
    const limiter = createFailureLimiter(settings, clock().now);
    for (let i = 0; i < 3; i++) limiter.fail('a');
    expect(limiter.retryAfterSeconds('a')).toBeGreaterThan(0);
    expect(limiter.retryAfterSeconds('b')).toBe(0);
  });

  it('holds at most maxKeys keys, dropping the oldest', () => {
    const limiter = createFailureLimiter({ ...settings, maxKeys: 100 }, clock().now);
    for (let i = 0; i < 3; i++) limiter.fail('first');
    for (let i = 0; i < 1000; i++) limiter.fail(`k${i}`);
    expect(limiter.size).toBe(100);
    expect(limiter.retryAfterSeconds('first')).toBe(0);
  });
});

describe('unknown cache', () => {
  it('remembers a key for unknownTtlMs, and nothing when the TTL is 0', () => {
    const c = clock();
    const cache = createUnknownCache(settings, c.now);
    expect(cache.has('x')).toBe(false);
    cache.add('x');
    expect(cache.has('x')).toBe(true);
    c.advance(5_000);
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
  });
});
