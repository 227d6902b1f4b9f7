/**
 * Three credentials: `Authorization: Bearer <session>` (bearerAuth), `x-api-key: <raw key>` (denApiKey),
 * and `Authorization: Bearer den_rt_…`, a runner token (src/identity/runner-auth.ts).
 * A present-but-malformed header is a 401, never a 500.
 *
 * A valid credential is never refused because of other requests' failures, whatever address they
 * came from. What a forged credential may cost is bounded instead: one this process has not
 * verified is looked up through a batched lookup (src/app/batched-lookup.ts), so a flood of them
 * costs a bounded number of queries in flight, and one Postgres did not know a moment ago is
 * refused again from memory.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { AppError, errors } from '../app/errors';
import type { PlatformValues } from '../app/feature';
import { createBatchedLookup, type BatchedLookup } from '../app/batched-lookup';
import { boundedCache, createRecentSet, createUnknownCache, type BoundedCache, type UnknownCache } from '../app/bounded-caches';
import type { Authenticator, Principal } from '../app/http/auth';
import type { Logger } from '../app/log';
import type { Metrics } from '../app/metrics';
import type { Channels } from '../app/store/channels';
import type { Db } from '../app/store/db';
import { createRunnerTokenAuth, isRunnerBearer, unknownRunnerToken } from './runner-auth';
import { findRunnerTokens } from './runner-tokens';
import { hashesEqual, hashSecret, isWellFormedApiKey, isWellFormedSessionToken } from './credentials';
import { findApiKeys, findSessions, touchApiKey, type ResolvedCredential } from './store';

/** last_used_at is written off the hot path, at most once a minute per key and process. */
const TOUCH_INTERVAL_MS = 60_000;

/**
 * Lookups of credentials this process has not verified: two queries in flight at most, up to 500
 * hashes each; past 20,000 waiting, the process is flooded and answers 503 `busy`.
 */
const FIRST_LOOKUPS = { concurrency: 2, maxBatch: 500, maxWaiting: 20_000 };

function onlyValue(value: string | string[] | undefined): string | undefined {
  // Node joins most duplicate headers with ", "; an array only appears for a few. Either way,
  // more than one credential is malformed.
  if (Array.isArray(value)) return value.length === 1 ? value[0] : '';
  return value;
}

/** API keys this process verified (kept only to ride out a Postgres outage, see verifiedKeys) and whose use it recorded. */
const VERIFIED_KEYS_MAX = 10_000;

/** One kind of credential: its direct lookup (one hash) and its batched lookup of first sightings. */
interface CredentialLookups {
  direct: (hash: string, at: Date) => Promise<ResolvedCredential | undefined>;
  first: BatchedLookup<ResolvedCredential>;
}

interface Memory {
  /** By key id: when this process last recorded the key's use. */
  lastTouched: BoundedCache<number>;
  /** By key hash (never the raw key): the principal and the key's own expiry. */
  verifiedKeys: BoundedCache<{ principal: Principal; expiresAt: number }>;
  /** Hashes of credentials Postgres did not know a moment ago: refused again without a query. */
  unknown: UnknownCache;
  /** Hashes of credentials that verified here: looked up directly, never behind first sightings. */
  trusted: { has(hash: string): boolean; add(hash: string): void; delete(hash: string): void };
  apiKeys: CredentialLookups;
  sessions: CredentialLookups;
  runnerTokens: CredentialLookups;
}

interface AuthDeps {
  db: Db;
  log: Logger;
  metrics: Metrics;
  now: () => number;
  platform: Pick<PlatformValues, 'authCaches'>;
  /** Announcements that runner tokens stopped, so the process forgets the ones it remembered (src/identity/runner-auth.ts). */
  channels?: Channels;
}

/** Both lookups of one credential kind, from its query over any number of hashes. */
function lookups(
  deps: AuthDeps,
  find: (db: Db, hashes: string[], now: Date) => Promise<Map<string, ResolvedCredential>>,
): CredentialLookups {
  return {
    direct: async (hash, at) => (await find(deps.db, [hash], at)).get(hash),
    first: createBatchedLookup((hashes) => find(deps.db, hashes, new Date(deps.now())), FIRST_LOOKUPS),
  };
}

/** The service's Authenticator (src/app/http/auth.ts): API keys and session tokens from Postgres. */
export function createAuthenticator(deps: AuthDeps): Authenticator {
  const caches = deps.platform.authCaches;
  const memory: Memory = {
    lastTouched: boundedCache({ max: VERIFIED_KEYS_MAX }),
    verifiedKeys: boundedCache({ max: VERIFIED_KEYS_MAX }),
    unknown: createUnknownCache(caches, deps.now),
    trusted: createRecentSet(caches.maxKeys),
    apiKeys: lookups(deps, findApiKeys),
    sessions: lookups(deps, findSessions),
    runnerTokens: lookups(deps, findRunnerTokens),
  };
  const runnerToken = createRunnerTokenAuth(deps, (hash, at) => resolve(memory, memory.runnerTokens, { hash, at }));
  return (headers) => authenticate({ deps, memory, runnerToken }, headers);
}

/** The raw credentials a request presents (each header at most once), before any check of their form. */
function presented(headers: IncomingHttpHeaders): { apiKey?: string; authorization?: string; bearer?: string; hashes: string[] } {
  const apiKey = onlyValue(headers['x-api-key']);
  const authorization = onlyValue(headers.authorization);
  const bearer = authorization === undefined ? undefined : /^Bearer ([^\s]+)$/i.exec(authorization.trim())?.[1];
  const hashes = [apiKey?.trim(), bearer ?? authorization].flatMap((raw) => (raw === undefined ? [] : [hashSecret(raw)]));
  return { apiKey, authorization, bearer, hashes };
}

/** A 401 for a credential that was looked up, or is known from a moment ago not to exist. */
function authRefusal({ metrics }: Pick<AuthDeps, 'metrics'>, outcome: 'rejected' | 'unknown_cached'): AppError {
  metrics.authFailures.inc({ surface: 'credentials', outcome });
  return errors.unauthorized();
}

/** One credential as a request presented it: its hash, and the request's time. */
interface Sighting {
  hash: string;
  at: Date;
}

/**
 * The credential behind a hash: looked up directly when this process verified it before, else
 * through the batched lookup of first sightings. Not found: remembered as unknown for a moment.
 */
async function resolve(memory: Memory, kind: CredentialLookups, { hash, at }: Sighting): Promise<ResolvedCredential | undefined> {
  const found = memory.trusted.has(hash) ? await kind.direct(hash, at) : await kind.first(hash);
  if (found && hashesEqual(found.hash, hash)) {
    memory.trusted.add(hash);
    return found;
  }
  memory.trusted.delete(hash);
  memory.unknown.add(hash);
  return undefined;
}

/**
 * Every API key is checked against Postgres, so a revocation counts at once. Only when Postgres
 * cannot answer does a key this process verified before keep working, until the key's own
 * expiry: runtimes then keep heartbeating through the outage instead of every live run losing its
 * lease. Nothing can be revoked while Postgres is down; a revocation made in the
 * moments before the outage may go unseen until it ends.
 */
async function findKeyOrRemembered(memory: Memory, raw: string, at: Date): Promise<{ principal: Principal; keyId?: string } | undefined> {
  const hash = hashSecret(raw);
  let found;
  try {
    found = await resolve(memory, memory.apiKeys, { hash, at });
  } catch (error) {
    const remembered = memory.verifiedKeys.get(hash);
    if (remembered && error instanceof AppError && error.dependency === 'postgres' && remembered.expiresAt > at.getTime()) {
      return { principal: remembered.principal };
    }
    throw error;
  }
  if (!found) {
    memory.verifiedKeys.delete(hash);
    return undefined;
  }
  const principal: Principal = {
    userId: found.userId,
    organizationId: found.organizationId,
    memberId: found.memberId,
    role: found.role,
    via: 'api_key',
    apiKeyId: found.keyId,
  };
  // The least recently verified is dropped first.
  memory.verifiedKeys.set(hash, { principal, expiresAt: found.expiresAt?.getTime() ?? 0 });
  return { principal, keyId: found.keyId };
}

/** What authenticating a request reads: the deps, this process's memory of credentials, and the runner tokens' check. */
interface Authentication {
  deps: AuthDeps;
  memory: Memory;
  runnerToken: (raw: string, at: Date) => Promise<Principal>;
}

async function authenticate(auth: Authentication, headers: IncomingHttpHeaders): Promise<Principal> {
  const { deps, memory, runnerToken } = auth;
  const { db, log, now } = deps;
  const { lastTouched } = memory;
  const { apiKey, authorization, bearer, hashes } = presented(headers);
  if (hashes.some((hash) => memory.unknown.has(hash))) {
    const error = authRefusal(deps, 'unknown_cached');
    throw isRunnerBearer(bearer) ? unknownRunnerToken() : error;
  }
  const at = new Date(now());

  // All or nothing: every credential presented must be valid, whatever else the request
  // carries (a bad one is an attack or a bug, never something to fall back from). When both are
  // valid, the API key is the principal.
  const session =
    authorization === undefined
      ? undefined
      : isRunnerBearer(bearer)
        ? await runnerToken(bearer!, at)
        : await sessionPrincipal(auth, authorization, at);
  if (apiKey !== undefined) {
    const raw = apiKey.trim();
    if (!isWellFormedApiKey(raw)) throw errors.unauthorized();
    const found = await findKeyOrRemembered(memory, raw, at);
    if (!found) throw authRefusal(deps, 'rejected');
    const keyId = found.keyId;
    const previous = keyId === undefined ? at.getTime() : (lastTouched.get(keyId) ?? 0);
    if (keyId !== undefined && at.getTime() - previous >= TOUCH_INTERVAL_MS) {
      lastTouched.set(keyId, at.getTime());
      touchApiKey(db, keyId, at).catch((error: unknown) => log.warn({ err: error }, 'could not record api key use'));
    }
    return found.principal;
  }
  if (session) return session;
  throw errors.unauthorized();
}

/** `Authorization: Bearer <session token>`, or 401. */
async function sessionPrincipal({ deps, memory }: Authentication, authorization: string, at: Date): Promise<Principal> {
  const match = /^Bearer ([^\s]+)$/i.exec(authorization.trim());
  if (!match || !isWellFormedSessionToken(match[1]!)) throw errors.unauthorized();
  const found = await resolve(memory, memory.sessions, { hash: hashSecret(match[1]!), at });
  if (!found) throw authRefusal(deps, 'rejected');
  return {
    userId: found.userId,
    organizationId: found.organizationId,
    memberId: found.memberId,
    role: found.role,
    via: 'session',
    sessionTokenHash: found.hash,
  };
}
