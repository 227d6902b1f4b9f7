/**
 * Spec §5: `Authorization: Bearer <session>` (bearerAuth) or `x-api-key: <raw key>` (denApiKey).
 * A present-but-malformed header is a 401, never a 500.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { errors } from '../app/errors';
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

/** The service's Authenticator (src/app/http/auth.ts): API keys and session tokens from Postgres. */
export function createAuthenticator(deps: { db: Db; log: Logger; now: () => number }): Authenticator {
  const lastTouched = new Map<string, number>();
  return (headers) => authenticate(deps, lastTouched, headers);
}

async function authenticate(
  { db, log, now }: { db: Db; log: Logger; now: () => number },
  lastTouched: Map<string, number>,
  headers: IncomingHttpHeaders,
): Promise<Principal> {
  const apiKey = single(headers['x-api-key']);
  const authorization = single(headers.authorization);
  const at = new Date(now());

  if (apiKey !== undefined) {
    const raw = apiKey.trim();
    if (!isWellFormedApiKey(raw)) throw errors.unauthorized();
    const found = await findApiKey(db, raw, at);
    if (!found || !hashesEqual(found.hash, hashSecret(raw))) throw errors.unauthorized();
    const keyId = found.keyId!;
    const previous = lastTouched.get(keyId) ?? 0;
    if (at.getTime() - previous >= TOUCH_INTERVAL_MS) {
      lastTouched.set(keyId, at.getTime());
      touchApiKey(db, keyId, at).catch((error: unknown) => log.warn({ err: error }, 'could not record api key use'));
    }
    return { userId: found.userId, organizationId: found.organizationId, memberId: found.memberId, role: found.role, via: 'api_key' };
  }

  if (authorization !== undefined) {
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

  throw errors.unauthorized();
}
