/**
 * Limits on failed authentications, kept in memory and bounded in size: past `maxFailures`
 * failures of one key (a source address, a connection id) within `windowMs`, the key is refused
 * until its window ends, before any database or crypto work. Only failures are counted, so
 * successful requests never fill a window. A short negative cache remembers credentials and ids
 * that were just looked up and not found, so repeating one costs no query.
 */

export interface FailureLimitSettings {
  /** Failures one key may have in a window; the next request is refused until the window ends. */
  maxFailures: number;
  windowMs: number;
  /** Keys each map holds at most; the oldest is dropped first. */
  maxKeys: number;
  /** How long an unknown credential or id is answered without a lookup. */
  unknownTtlMs: number;
}

/** A Map that drops its oldest entry (insertion order) once it holds more than `maxKeys`. */
class BoundedMap<V> {
  private readonly entries = new Map<string, V>();
  constructor(private readonly maxKeys: number) {}

  get(key: string): V | undefined {
    return this.entries.get(key);
  }

  /** Stores the value as the newest entry. */
  set(key: string, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.maxKeys) this.entries.delete(this.entries.keys().next().value!);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }
}

export interface FailureLimiter {
  /** Whole seconds until the key may be tried again, or 0 when it is not limited. */
  retryAfterSeconds(key: string): number;
  /** Counts one failed authentication against the key. */
  fail(key: string): void;
  /** Keys currently tracked (bounded by `maxKeys`). */
  readonly size: number;
}

/** Fixed windows per key: a window starts at a key's first failure and lasts `windowMs`. */
export function createFailureLimiter(settings: FailureLimitSettings, now: () => number): FailureLimiter {
  const windows = new BoundedMap<{ failures: number; endsAt: number }>(settings.maxKeys);
  const current = (key: string) => {
    const window = windows.get(key);
    if (window && window.endsAt <= now()) {
      windows.delete(key);
      return undefined;
    }
    return window;
  };
  return {
    retryAfterSeconds(key) {
      const window = current(key);
      if (!window || window.failures < settings.maxFailures) return 0;
      return Math.max(1, Math.ceil((window.endsAt - now()) / 1000));
    },
    fail(key) {
      const window = current(key);
      if (window) window.failures += 1;
      else windows.set(key, { failures: 1, endsAt: now() + settings.windowMs });
    },
    get size() {
      return windows.size;
    },
  };
}

export interface UnknownCache {
  has(key: string): boolean;
  add(key: string): void;
  readonly size: number;
}

/** Keys that were looked up and not found, each for `unknownTtlMs`, at most `maxKeys` of them. */
export function createUnknownCache(settings: FailureLimitSettings, now: () => number): UnknownCache {
  const expiries = new BoundedMap<number>(settings.maxKeys);
  return {
    has(key) {
      const expiresAt = expiries.get(key);
      if (expiresAt === undefined) return false;
      if (expiresAt > now()) return true;
      expiries.delete(key);
      return false;
    },
    add(key) {
      if (settings.unknownTtlMs > 0) expiries.set(key, now() + settings.unknownTtlMs);
    },
    get size() {
      return expiries.size;
    },
  };
}

/** A set of recent keys, at most `maxKeys`, the least recently added dropped first. */
export function createRecentSet(maxKeys: number): { has(key: string): boolean; add(key: string): void } {
  const keys = new BoundedMap<true>(maxKeys);
  return { has: (key) => keys.get(key) === true, add: (key) => keys.set(key, true) };
}
