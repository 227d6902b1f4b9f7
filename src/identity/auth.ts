/**
 * Two credentials: `Authorization: Bearer <session>` (bearerAuth) or `x-api-key: <raw key>` (denApiKey).
 * A present-but-malformed header is a 401, never a 500.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { AppError, errors } from '../app/errors';
import type { PlatformSettings } from '../app/feature';
import { createFailureLimiter, createRecentSet, createUnknownCache, type FailureLimiter, type UnknownCache } from '../app/failure-limit';
import type { Authenticator, Principal } from '../app/http/auth';
import type { Logger } from '../app/log';
import type { Metrics } from '../app/metrics';
import type { Db } from '../app/store/db';
import { hashesEqual, hashSecret, isWellFormedApiKey, isWellFormedSessionToken } from './credentials';
import { findApiKey, findSession, touchApiKey } from './store';

/** last_used_at is written off the hot path, at most once a minute per key and process. */
const TOUCH_INTERVAL_MS = 60_000;

function single(value: string | string[] | undefined): string | undefined {
  // Node joins most duplicate headers with ", "; an array only appears for a few. Either way,
  // more than one credential is malformed.
  if (Array.isArray(value)) return value.length === 1 ? value[0] : '';
  return value;
}

/** API keys this process verified, kept only to ride out a Postgres outage (see verifiedKeys). */
const VERIFIED_KEYS_MAX = 10_000;

interface Memory {
  lastTouched: Map<string, number>;
  /** By key hash (never the raw key): the principal and the key's own expiry. */
  verifiedKeys: Map<string, { principal: Principal; expiresAt: number }>;
  /** Failed authentications per source address. */
  failures: FailureLimiter;
  /** Hashes of credentials Postgres did not know a moment ago: refused again without a query. */
  unknown: UnknownCache;
  /** Hashes of credentials that verified here: still looked up while their address is limited. */
  trusted: { has(hash: string): boolean; add(hash: string): void };
}

interface AuthDeps {
  db: Db;
  log: Logger;
  metrics: Metrics;
  now: () => number;
  platform: Pick<PlatformSettings, 'failureLimits'>;
}

/** The service's Authenticator (src/app/http/auth.ts): API keys and session tokens from Postgres. */
export function createAuthenticator(deps: AuthDeps): Authenticator {
  const limits = deps.platform.failureLimits;
  const memory: Memory = {
    lastTouched: new Map(),
    verifiedKeys: new Map(),
    failures: createFailureLimiter(limits, deps.now),
    unknown: createUnknownCache(limits, deps.now),
    trusted: createRecentSet(limits.maxKeys),
  };
  return (headers, source) => authenticate(deps, memory, headers, source.address);
}

/** The raw credentials a request presents (each header at most once), before any check of their form. */
function presented(headers: IncomingHttpHeaders): { apiKey?: string; authorization?: string; hashes: string[] } {
  const apiKey = single(headers['x-api-key']);
  const authorization = single(headers.authorization);
  const bearer = authorization === undefined ? undefined : /^Bearer ([^\s]+)$/i.exec(authorization.trim())?.[1];
  const hashes = [apiKey?.trim(), bearer ?? authorization].flatMap((raw) => (raw === undefined ? [] : [hashSecret(raw)]));
  return { apiKey, authorization, hashes };
}

/**
 * Before any query: an address past its failure limit gets 429, unless every credential it
 * presents verified here before (so a good key keeps working from an address that also sends bad
 * ones); a credential Postgres did not know a moment ago gets 401 again.
 */
function admit({ metrics }: AuthDeps, memory: Memory, address: string, hashes: string[]): void {
  const retryAfter = memory.failures.retryAfterSeconds(address);
  if (retryAfter > 0 && !(hashes.length > 0 && hashes.every((hash) => memory.trusted.has(hash)))) {
    metrics.authFailures.inc({ surface: 'credentials', outcome: 'limited' });
    throw errors.tooManyFailures(retryAfter, 'api');
  }
  if (hashes.some((hash) => memory.unknown.has(hash))) throw refusal({ metrics }, memory, address, 'unknown_cached');
}

/**
 * A 401 for a credential that was looked up (or is known not to exist), counted against the
 * address; missing or malformed credentials cost no lookup and are not counted.
 */
function refusal(
  { metrics }: Pick<AuthDeps, 'metrics'>,
  memory: Memory,
  address: string,
  outcome: 'rejected' | 'unknown_cached',
): AppError {
  memory.failures.fail(address);
  metrics.authFailures.inc({ surface: 'credentials', outcome });
  return errors.unauthorized();
}

/**
 * Every API key is checked against Postgres, so a revocation counts at once. Only when Postgres
 * cannot answer does a key this process verified before keep working, until the key's own
 * expiry: runtimes then keep heartbeating through the outage instead of every live run losing its
 * lease. Nothing can be revoked while Postgres is down; a revocation made in the
 * moments before the outage may go unseen until it ends.
 */
async function findKeyOrRemembered(
  db: Db,
  memory: Memory,
  raw: string,
  at: Date,
): Promise<{ principal: Principal; keyId?: string } | undefined> {
  const hash = hashSecret(raw);
  let found;
  try {
    found = await findApiKey(db, raw, at);
  } catch (error) {
    const remembered = memory.verifiedKeys.get(hash);
    if (remembered && error instanceof AppError && error.dependency === 'postgres' && remembered.expiresAt > at.getTime()) {
      return { principal: remembered.principal };
    }
    throw error;
  }
  if (!found || !hashesEqual(found.hash, hash)) {
    memory.verifiedKeys.delete(hash);
    memory.unknown.add(hash);
    return undefined;
  }
  memory.trusted.add(hash);
  const principal: Principal = {
    userId: found.userId,
    organizationId: found.organizationId,
    memberId: found.memberId,
    role: found.role,
    via: 'api_key',
  };
  memory.verifiedKeys.delete(hash);
  memory.verifiedKeys.set(hash, { principal, expiresAt: found.expiresAt?.getTime() ?? 0 });
  // Insertion order is recency order: drop the least recently verified.
  if (memory.verifiedKeys.size > VERIFIED_KEYS_MAX) memory.verifiedKeys.delete(memory.verifiedKeys.keys().next().value!);
  return { principal, keyId: found.keyId };
}

async function authenticate(deps: AuthDeps, memory: Memory, headers: IncomingHttpHeaders, address: string): Promise<Principal> {
  const { db, log, now } = deps;
  const { lastTouched } = memory;
  const { apiKey, authorization, hashes } = presented(headers);
  admit(deps, memory, address, hashes);
  const at = new Date(now());

  // All or nothing: every credential presented must be valid, whatever else the request
  // carries (a bad one is an attack or a bug, never something to fall back from). When both are
  // valid, the API key is the principal.
  const refuse = () => refusal(deps, memory, address, 'rejected');
  const session = authorization === undefined ? undefined : await sessionPrincipal(db, memory, authorization, at, refuse);
  if (apiKey !== undefined) {
    const raw = apiKey.trim();
    if (!isWellFormedApiKey(raw)) throw errors.unauthorized();
    const found = await findKeyOrRemembered(db, memory, raw, at);
    if (!found) throw refuse();
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
async function sessionPrincipal(db: Db, memory: Memory, authorization: string, at: Date, refuse: () => AppError): Promise<Principal> {
  const match = /^Bearer ([^\s]+)$/i.exec(authorization.trim());
  if (!match || !isWellFormedSessionToken(match[1]!)) throw errors.unauthorized();
  const raw = match[1]!;
  const found = await findSession(db, raw, at);
  if (!found || !hashesEqual(found.hash, hashSecret(raw))) {
    memory.unknown.add(hashSecret(raw));
    throw refuse();
  }
  memory.trusted.add(found.hash);
  return {
    userId: found.userId,
    organizationId: found.organizationId,
    memberId: found.memberId,
    role: found.role,
    via: 'session',
    sessionTokenHash: found.hash,
  };
}
