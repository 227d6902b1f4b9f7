/**
 * Spec §5: `Authorization: Bearer <session>` (bearerAuth) or `x-api-key: <raw key>` (denApiKey).
 * A present-but-malformed header is a 401, never a 500.
 */
import { errors } from '../app/errors';
import type { AppContext } from '../app/http/context';
import type { Role } from '../app/store/migrations/0001_identity';
import { hashesEqual, hashSecret, isWellFormedApiKey, isWellFormedSessionToken } from './credentials';
import { findApiKey, findSession, touchApiKey } from './store';

/** What a route declares: either scheme, admins only, a provider signature, or nothing. */
export type AuthMode = 'public' | 'signature' | 'authenticated' | 'admin';

export interface Principal {
  userId: string;
  organizationId: string;
  memberId: string;
  role: Role;
  via: 'api_key' | 'session';
  /** Present for sessions: the hash that identifies the session row. */
  sessionTokenHash?: string;
}

export const ROLE_LEVEL: Record<Role, number> = { owner: 2, admin: 1, member: 0 };
export const isAdmin = (role: Role) => ROLE_LEVEL[role] >= 1;

/** last_used_at is written off the hot path, at most once a minute per key and process. */
const TOUCH_INTERVAL_MS = 60_000;
const lastTouched = new Map<string, number>();

function single(value: string | string[] | undefined): string | undefined {
  // Node joins most duplicate headers with ", "; an array only appears for a few. Either way,
  // more than one credential is malformed.
  if (Array.isArray(value)) return value.length === 1 ? value[0] : '';
  return value;
}

async function authenticate(ctx: AppContext): Promise<Principal> {
  const { database, now, log } = ctx.state.services;
  const apiKey = single(ctx.headers['x-api-key']);
  const authorization = single(ctx.headers.authorization);
  const at = new Date(now());

  if (apiKey !== undefined) {
    const raw = apiKey.trim();
    if (!isWellFormedApiKey(raw)) throw errors.unauthorized();
    const found = await findApiKey(database.db, raw, at);
    if (!found || !hashesEqual(found.hash, hashSecret(raw))) throw errors.unauthorized();
    const keyId = found.keyId!;
    const previous = lastTouched.get(keyId) ?? 0;
    if (at.getTime() - previous >= TOUCH_INTERVAL_MS) {
      lastTouched.set(keyId, at.getTime());
      touchApiKey(database.db, keyId, at).catch((error: unknown) => log.warn({ err: error }, 'could not record api key use'));
    }
    return { userId: found.userId, organizationId: found.organizationId, memberId: found.memberId, role: found.role, via: 'api_key' };
  }

  if (authorization !== undefined) {
    const match = /^Bearer ([^\s]+)$/i.exec(authorization.trim());
    if (!match || !isWellFormedSessionToken(match[1]!)) throw errors.unauthorized();
    const raw = match[1]!;
    const found = await findSession(database.db, raw, at);
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

/** Enforces a route's declared mode; returns the principal for authenticated/admin routes. */
export async function requireAuth(
  ctx: AppContext,
  mode: AuthMode,
  options: { sessionOnly?: boolean } = {},
): Promise<Principal | undefined> {
  if (mode === 'public' || mode === 'signature') return undefined;
  const principal = await authenticate(ctx);
  ctx.state.principal = principal;
  if (options.sessionOnly && principal.via !== 'session') {
    throw errors.forbidden('session_required', 'This action needs a signed-in session; API keys cannot perform it.');
  }
  if (mode === 'admin' && !isAdmin(principal.role)) {
    throw errors.forbidden('admin_required', 'Only organization owners and admins can do this.');
  }
  return principal;
}
