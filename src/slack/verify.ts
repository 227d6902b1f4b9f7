/**
 * The two checks the events and commands routes share: find the installation (else 401
 * `unknown_installation`), then verify the signature over the raw bytes (else 401 `invalid_signature`).
 * Routes whose requests carry no id of their own to dedupe on add the replay cache with `verifiedOnce`.
 */
import { errors } from '../app/errors';
import type { AppContext } from '../app/http/context';
import type { Metrics } from '../app/metrics';
import type { SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import { findSlackConnection, type SlackConnection } from './connections';
import { firstSighting } from './replays';
import { signatureStamp, verifySlackSignature } from './signature';

export interface VerifyDeps {
  db: Db;
  secretKey: SecretKeys;
  metrics: Metrics;
  now: () => number;
}

/** 401 `{ok:false}` for both causes, so a caller learns nothing about which ids exist. */
export async function verifiedConnection(
  deps: VerifyDeps,
  ctx: AppContext,
  connectionId: string,
  rawBody: Buffer,
): Promise<SlackConnection> {
  const connection = await findSlackConnection(deps.db, deps.secretKey, connectionId);
  if (!connection) throw errors.webhook('unknown_installation', 401);
  const verdict = verifySlackSignature({ rawBody, headers: ctx.headers, secrets: connection.secrets, now: deps.now });
  if (!verdict.ok) {
    deps.metrics.signatureFailures.inc({ route: ctx.state.routeTemplate ?? 'slack', reason: verdict.reason });
    ctx.state.log.info({ connectionId, reason: verdict.reason }, 'slack signature rejected');
    throw errors.webhook('invalid_signature', 401);
  }
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
