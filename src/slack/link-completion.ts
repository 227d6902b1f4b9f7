/**
 * Completing a connect link: the token's Slack user becomes a member, and invocations of that
 * user waiting for the link resume. One implementation for the account-links route (the
 * dashboard's connect page calls it) and `den slack links complete` (deployments without one).
 */
import type { IngressGateway } from '../app/ingress';
import type { SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import { findSlackConnection } from './connections';
import { slackAccountLinkedSignal } from './contract';
import { verifyLinkToken } from './link-token';
import { redeemLink } from './links';

export interface LinkCompletionDeps {
  db: Db;
  secretKey: SecretKeys;
  ingress: IngressGateway;
  now: () => number;
}

/**
 * Each refusal, with the status the account-links route answers it with. Another organization's
 * connection is a 404 with the same body as a missing one, so connection ids cannot be probed.
 */
export const LINK_REFUSAL_STATUS = {
  no_connection: 404,
  other_organization: 404,
  invalid_link: 400,
  link_expired: 410,
  link_used: 409,
  already_linked: 409,
} as const;
export type LinkRefusal = keyof typeof LINK_REFUSAL_STATUS;

export type LinkCompletion =
  { ok: true; connectionId: string; slackUserId: string; memberId: string; resumed: number } | { ok: false; error: LinkRefusal };

/**
 * `connectionId`: the connection the caller names (the route's path), or undefined to take the
 * token's own (the CLI). Either way the token must be genuine, unexpired, unused, and for that
 * connection's workspace.
 */
export async function completeLink(
  deps: LinkCompletionDeps,
  input: { token: string; connectionId?: string; organizationId: string; memberId: string },
): Promise<LinkCompletion> {
  const { db, secretKey, ingress, now } = deps;
  const verdict = verifyLinkToken(secretKey, input.token, now());
  const claims = 'claims' in verdict ? verdict.claims : undefined;
  const connectionId = input.connectionId ?? claims?.connectionId;
  if (connectionId === undefined) return { ok: false, error: 'invalid_link' };
  const connection = await findSlackConnection(db, secretKey, connectionId);
  if (!connection) return { ok: false, error: 'no_connection' };
  if (connection.organizationId !== input.organizationId) return { ok: false, error: 'other_organization' };
  if (!claims) return { ok: false, error: 'invalid_link' };
  // A genuine token for another connection or workspace is not a link for this one.
  if (claims.connectionId !== connection.id || claims.teamId !== connection.teamId) return { ok: false, error: 'invalid_link' };
  if (!verdict.ok) return { ok: false, error: 'link_expired' };

  const linked = { slackUserId: claims.slackUserId, organizationId: input.organizationId, memberId: input.memberId };
  const outcome = await redeemLink(
    db,
    {
      connectionId: connection.id,
      slackUserId: claims.slackUserId,
      organizationId: input.organizationId,
      memberId: input.memberId,
      nonce: claims.nonce,
      tokenExpiresAt: new Date(claims.expiresAt),
      now: new Date(now()),
    },
    // Inside the transaction: if Temporal cannot take the signals, the link is not recorded
    // (503, token still valid), so a waiting invocation is never stranded.
    async (workflowIds) => {
      // One that already gave up waiting (or finished) is not found: nothing to resume.
      for (const id of workflowIds) await ingress.signal({ id, signal: slackAccountLinkedSignal, args: [linked] });
    },
  );
  if (!outcome.ok) return { ok: false, error: outcome.error };
  return {
    ok: true,
    connectionId: connection.id,
    slackUserId: claims.slackUserId,
    memberId: input.memberId,
    resumed: outcome.waitingWorkflowIds.length,
  };
}
