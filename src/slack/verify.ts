/**
 * The two checks the events and commands routes share: find the installation (else 401
 * `unknown_installation`), then verify the signature over the raw bytes (else 401 `invalid_signature`).
 * Routes whose requests carry no id of their own to dedupe on add the replay cache with `verifiedOnce`.
 * Before both, an address or a connection id past its failure limit gets 429 with `Retry-After`,
 * and an id that was not found a moment ago gets 401 again without a lookup.
 */
import { errors } from '../app/errors';
import {
  createFailureLimiter,
  createUnknownCache,
  type FailureLimiter,
  type FailureLimitSettings,
  type UnknownCache,
} from '../app/failure-limit';
import type { AppContext } from '../app/http/context';
import type { Metrics } from '../app/metrics';
import type { SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import { findSlackConnection, type SlackConnection } from './connections';
import { firstSighting } from './replays';
import { signatureStamp, slackHeadersFailure, verifySlackSignature } from './signature';

export interface VerifyDeps {
  db: Db;
  secretKey: SecretKeys;
  metrics: Metrics;
  now: () => number;
  guard: SlackGuard;
}

/** Failed verifications per source address and per connection id, and the ids just found unknown. */
export interface SlackGuard {
  byAddress: FailureLimiter;
  byConnection: FailureLimiter;
  unknownConnections: UnknownCache;
}

export function createSlackGuard(limits: FailureLimitSettings, now: () => number): SlackGuard {
  return {
    byAddress: createFailureLimiter(limits, now),
    byConnection: createFailureLimiter(limits, now),
    unknownConnections: createUnknownCache(limits, now),
  };
}

/** 429 before any lookup when the address or the connection id is past its failure limit. */
function admit({ guard, metrics }: VerifyDeps, address: string, connectionId: string): void {
  const retryAfter = Math.max(guard.byAddress.retryAfterSeconds(address), guard.byConnection.retryAfterSeconds(connectionId));
  if (retryAfter === 0) return;
  metrics.authFailures.inc({ surface: 'slack', outcome: 'limited' });
  throw errors.tooManyFailures(retryAfter, 'webhook');
}

/** Counts a failed verification against the address and the connection id. */
function failed({ guard, metrics }: VerifyDeps, address: string, connectionId: string, outcome: 'rejected' | 'unknown_cached'): void {
  guard.byAddress.fail(address);
  guard.byConnection.fail(connectionId);
  metrics.authFailures.inc({ surface: 'slack', outcome });
}

/** Connections found before their request's body was read (knownConnection), for the verification after it. */
const foundBeforeBody = new WeakMap<AppContext, SlackConnection>();

/**
 * The checks that need no body, run before it is read: 429 past a failure limit, 401 for an
 * unknown installation, and 401 for signature headers that cannot verify whatever the body.
 */
export async function knownConnection(deps: VerifyDeps, ctx: AppContext, connectionId: string): Promise<SlackConnection> {
  const address = ctx.ip;
  admit(deps, address, connectionId);
  if (deps.guard.unknownConnections.has(connectionId)) {
    failed(deps, address, connectionId, 'unknown_cached');
    throw errors.webhook('unknown_installation', 401);
  }
  const connection = await findSlackConnection(deps.db, deps.secretKey, connectionId);
  if (!connection) {
    deps.guard.unknownConnections.add(connectionId);
    failed(deps, address, connectionId, 'rejected');
    throw errors.webhook('unknown_installation', 401);
  }
  const failure = slackHeadersFailure(ctx.headers, deps.now);
  if (failure) rejectSignature(deps, ctx, connectionId, failure);
  foundBeforeBody.set(ctx, connection);
  return connection;
}

function rejectSignature(deps: VerifyDeps, ctx: AppContext, connectionId: string, reason: string): never {
  failed(deps, ctx.ip, connectionId, 'rejected');
  deps.metrics.signatureFailures.inc({ route: ctx.state.routeTemplate ?? 'slack', reason });
  ctx.state.log.info({ connectionId, reason }, 'slack signature rejected');
  throw errors.webhook('invalid_signature', 401);
}

/**
 * The installation (found before the body was read, or now), then the signature over the raw
 * bytes. 401 `{ok:false}` for both causes, so a caller learns nothing about which ids exist.
 */
export async function verifiedConnection(
  deps: VerifyDeps,
  ctx: AppContext,
  connectionId: string,
  rawBody: Buffer,
): Promise<SlackConnection> {
  const connection = foundBeforeBody.get(ctx) ?? (await knownConnection(deps, ctx, connectionId));
  const verdict = verifySlackSignature({ rawBody, headers: ctx.headers, secrets: connection.secrets, now: deps.now });
  if (!verdict.ok) rejectSignature(deps, ctx, connectionId, verdict.reason);
  if (verdict.secret === 'previous') ctx.state.log.info({ connectionId }, 'slack request verified with the previous signing secret');
  return connection;
}

/**
 * `verifiedConnection`, then the replay cache: a request already seen within its signature window
 * is a 401 `{ok:false}` like a bad signature, so a captured request is worth one answer only.
 */
export async function verifiedOnce(deps: VerifyDeps, ctx: AppContext, connectionId: string, rawBody: Buffer): Promise<SlackConnection> {
  const connection = await verifiedConnection(deps, ctx, connectionId, rawBody);
  if (!(await firstSighting(deps.db, { connectionId, ...signatureStamp(ctx.headers) }))) {
    deps.metrics.signatureFailures.inc({ route: ctx.state.routeTemplate ?? 'slack', reason: 'replayed' });
    ctx.state.log.info({ connectionId }, 'slack request replayed within its signature window');
    throw errors.webhook('invalid_signature', 401);
  }
  return connection;
}
