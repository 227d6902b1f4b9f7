/**
 * The in-memory caches that keep a forged credential or signature cheap to refuse, each bounded
 * in size so no stream of requests can grow them: a short negative cache of credentials and ids
 * that were looked up and not found, a set of credentials this process verified, and a cache of
 * values (a Slack connection's signing secrets) that saves a database read per request.
 *
 * None of them refuses anything by itself: a valid request is never turned away because of what
 * other requests did. What they bound is the work a forgery costs.
 */

export interface AuthCacheSettings {
  /** Entries each cache holds at most; the least recently used is dropped first. */
  maxKeys: number;
  /** How long an unknown credential or id is answered without a lookup. */
  unknownTtlMs: number;
}

/** A Map that drops its least recently used entry once it holds more than `maxKeys`. */
class BoundedMap<V> {
  private readonly entries = new Map<string, V>();
  constructor(private readonly maxKeys: number) {}

  /** The value, marked as the most recently used. */
  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  /** Stores the value as the most recently used entry (a Map iterates in insertion order). */
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

export interface UnknownCache {
  has(key: string): boolean;
  add(key: string): void;
  /** Forgets a key that turned out to exist after all. */
  delete(key: string): void;
  readonly size: number;
}

/** Keys that were looked up and not found, each for `unknownTtlMs`, at most `maxKeys` of them. */
export function createUnknownCache(settings: AuthCacheSettings, now: () => number): UnknownCache {
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
    delete: (key) => expiries.delete(key),
    get size() {
      return expiries.size;
    },
  };
}

/** A set of recent keys, at most `maxKeys`, the least recently used dropped first. */
export function createRecentSet(maxKeys: number): { has(key: string): boolean; add(key: string): void; delete(key: string): void } {
  const keys = new BoundedMap<true>(maxKeys);
  return { has: (key) => keys.get(key) === true, add: (key) => keys.set(key, true), delete: (key) => keys.delete(key) };
}

export interface BoundedCache<V> {
  get(key: string): V | undefined;
  set(key: string, value: V): void;
  delete(key: string): void;
  readonly size: number;
}

/** A least-recently-used cache of at most `maxKeys` values. */
export function createBoundedCache<V>(maxKeys: number): BoundedCache<V> {
  const map = new BoundedMap<V>(maxKeys);
  return {
    get: (key) => map.get(key),
    set: (key, value) => map.set(key, value),
    delete: (key) => map.delete(key),
    get size() {
      return map.size;
    },
  };
}
