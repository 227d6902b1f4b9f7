/**
 * The authentication vocabulary every route shares. The route pipeline enforces a
 * route's declared mode with an `Authenticator` that the identity feature provides at
 * composition, so the HTTP layer never imports a feature.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { errors } from '../errors';

export type Role = 'owner' | 'admin' | 'member';
export const ROLES: readonly Role[] = ['owner', 'admin', 'member'];

/** Role levels: owner 2, admin 1, member 0; "admin" means level ≥ 1, so an owner is an admin too. */
const ROLE_LEVEL: Record<Role, number> = { owner: 2, admin: 1, member: 0 };
export const isAdmin = (role: Role): boolean => ROLE_LEVEL[role] >= 1;

/** What a route declares: either scheme, admins only, a provider signature, or nothing. */
export type AuthMode = 'public' | 'signature' | 'authenticated' | 'admin';

export interface Principal {
  userId: string;
  organizationId: string;
  memberId: string;
  /** A runner token's is always `member`, whatever its member's role: it reaches only the member's own runs. */
  role: Role;
  via: 'api_key' | 'session' | 'runner_token';
  /** Present for sessions: the hash that identifies the session row. */
  sessionTokenHash?: string;
  /** Present for API keys this process verified against Postgres: the key's id. */
  apiKeyId?: string;
  /** Present for runner tokens: the runner the token is bound to, and the label it was minted with. */
  runner?: { id: string; label: string | null };
}

/** Resolves the request's credentials to a principal, or throws 401. */
export type Authenticator = (headers: IncomingHttpHeaders) => Promise<Principal>;

/** Who a route lets in: its mode, and whether only a session, or also a runner token, opens it. */
export interface RouteAccess {
  auth: AuthMode;
  sessionOnly?: boolean;
  runnerToken?: boolean;
}

/** Enforces a route's declared mode; returns the principal for authenticated/admin routes. */
export async function requireAuth(
  headers: IncomingHttpHeaders,
  authenticate: Authenticator,
  { auth: mode, ...options }: RouteAccess,
): Promise<Principal | undefined> {
  if (mode === 'public' || mode === 'signature') return undefined;
  const principal = await authenticate(headers);
  // A runner token runs on a machine that runs arbitrary commands: it opens the run routes only.
  if (principal.via === 'runner_token' && !options.runnerToken) {
    throw errors.forbidden('runner_token', 'A runner token opens only the automation-run routes; use an API key or a session.');
  }
  if (options.sessionOnly && principal.via !== 'session') {
    throw errors.forbidden('session_required', 'This action needs a signed-in session; API keys cannot perform it.');
  }
  if (mode === 'admin' && !isAdmin(principal.role)) {
    throw errors.forbidden('admin_required', 'Only organization owners and admins can do this.');
  }
  return principal;
}
