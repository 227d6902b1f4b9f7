/**
 * The in-memory caches that keep a forged credential or signature cheap to refuse, each bounded
 * in size so no stream of requests can grow them: a short negative cache of credentials and ids
 * that were looked up and not found, a set of credentials this process verified, and a cache of
 * values (a Slack connection's signing secrets) that saves a database read per request.
 *
 * None of them refuses anything by itself: a valid request is never turned away because of what
 * other requests did. What they bound is the work a forgery costs.
 */
import { LRUCache } from 'lru-cache';

export interface AuthCacheSettings {
  /** Entries each cache holds at most; the least recently used is dropped first. */
  maxKeys: number;
  /** How long an unknown credential or id is answered without a lookup. */
  unknownTtlMs: number;
}

/**
 * The one bounded cache of the service: at most `max` entries, the least recently used (set or
 * read) dropped first; with a TTL, each entry is gone once more than `ttlMs` passed since it was
 * set, on the clock `now` (tests inject one). `lru-cache` keeps the order and the expiries, so
 * nothing evicts by hand.
 */
export function boundedCache<V extends NonNullable<unknown>>(options: {
  max: number;
  ttlMs?: number;
  now?: () => number;
}): LRUCache<string, V> {
  const { max, ttlMs, now } = options;
  // Every expiry is checked against the clock itself (ttlResolution 0): the cache keeps no timer.
  const expiry = ttlMs ? { ttl: ttlMs, ttlResolution: 0, ...(now ? { perf: { now } } : {}) } : {};
  return new LRUCache<string, V>({ max, ...expiry });
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
  const unknown = boundedCache<true>({ max: settings.maxKeys, ttlMs: settings.unknownTtlMs, now });
  return {
    has: (key) => unknown.get(key) === true,
    add(key) {
      if (settings.unknownTtlMs > 0) unknown.set(key, true);
    },
    delete: (key) => void unknown.delete(key),
    get size() {
      return unknown.size;
    },
  };
}

/** A set of recent keys, at most `maxKeys`, the least recently used dropped first. */
export function createRecentSet(maxKeys: number): { has(key: string): boolean; add(key: string): void; delete(key: string): void } {
  const keys = boundedCache<true>({ max: maxKeys });
  return { has: (key) => keys.get(key) === true, add: (key) => void keys.set(key, true), delete: (key) => void keys.delete(key) };
}

/** What `boundedCache` returns. */
export type BoundedCache<V extends NonNullable<unknown>> = LRUCache<string, V>;
