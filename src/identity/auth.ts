/**
 * Two credentials: `Authorization: Bearer <session>` (bearerAuth) or `x-api-key: <raw key>` (denApiKey).
 * A present-but-malformed header is a 401, never a 500.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { AppError, errors } from '../app/errors';
import type { Authenticator, Principal } from '../app/http/auth';
import type { Logger } from '../app/log';
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
}

/** The service's Authenticator (src/app/http/auth.ts): API keys and session tokens from Postgres. */
export function createAuthenticator(deps: { db: Db; log: Logger; now: () => number }): Authenticator {
  const memory: Memory = { lastTouched: new Map(), verifiedKeys: new Map() };
  return (headers) => authenticate(deps, memory, headers);
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
    return undefined;
  }
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

async function authenticate(
  { db, log, now }: { db: Db; log: Logger; now: () => number },
  memory: Memory,
  headers: IncomingHttpHeaders,
): Promise<Principal> {
  const { lastTouched } = memory;
  const apiKey = single(headers['x-api-key']);
  const authorization = single(headers.authorization);
  const at = new Date(now());

  // All or nothing: every credential presented must be valid, whatever else the request
  // carries (a bad one is an attack or a bug, never something to fall back from). When both are
  // valid, the API key is the principal.
  const session = authorization === undefined ? undefined : await sessionPrincipal(db, authorization, at);
  if (apiKey !== undefined) {
    const raw = apiKey.trim();
    if (!isWellFormedApiKey(raw)) throw errors.unauthorized();
    const found = await findKeyOrRemembered(db, memory, raw, at);
    if (!found) throw errors.unauthorized();
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
async function sessionPrincipal(db: Db, authorization: string, at: Date): Promise<Principal> {
  const match = /^Bearer ([^\s]+)$/i.exec(authorization.trim());
  if (!match || !isWellFormedSessionToken(match[1]!)) throw errors.unauthorized();
  const raw = match[1]!;
  const found = await findSession(db, raw, at);
  if (!found || !hashesEqual(found.hash, hashSecret(raw))) throw errors.unauthorized();
  return {
    userId: found.userId,
    organizationId: found.organizationId,
    memberId: found.memberId,
    role: found.role,
    via: 'session',
    sessionTokenHash: found.hash,
  };
}
