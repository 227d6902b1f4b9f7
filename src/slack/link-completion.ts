/**
 * Completing a connect link: the Slack user of a link token or a link code becomes a member, and
 * invocations of that user waiting for the link resume. One implementation for the account-links
 * routes (the dashboard's connect page posts the token; `den slack link <code>`, run by the
 * member, posts the code) and `den slack links complete` (an operator, with the token).
 */
import type { IngressGateway } from '../app/ingress';
import type { SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import { findSlackConnection } from './connections';
import { slackAccountLinkedSignal } from './contract';
import { readLinkCode } from './link-codes';
import { verifyLinkToken, type LinkTokenVerdict } from './link-token';
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
 * A well-formed token or code this service never issued is `link_not_found`; `invalid_link` is
 * a malformed one, or a genuine one for another connection or workspace.
 */
export const LINK_REFUSAL_STATUS = {
  no_connection: 404,
  other_organization: 404,
  invalid_link: 400,
  link_not_found: 404,
  link_expired: 410,
  link_used: 409,
  already_linked: 409,
} as const;
export type LinkRefusal = keyof typeof LINK_REFUSAL_STATUS;

export type LinkCompletion =
  { ok: true; connectionId: string; slackUserId: string; memberId: string; resumed: number } | { ok: false; error: LinkRefusal };

/** What proves the Slack user: the signed token of a connect link, or a code the member typed. */
export type LinkProof = { token: string } | { code: string };

/** The claims behind a token (checked by its signature) or a code (looked up). */
async function claimsOf(deps: LinkCompletionDeps, proof: LinkProof): Promise<LinkTokenVerdict> {
  if ('token' in proof) return verifyLinkToken(deps.secretKey, proof.token, deps.now());
  return readLinkCode(deps, proof.code, deps.now());
}

/**
 * `connectionId`: the connection the caller names (the route's path), or undefined to take the
 * proof's own (a code's route, the CLI). Either way the proof must be genuine, unexpired, unused,
 * and for that connection's workspace, and the connection must still be installed.
 */
export async function completeLink(
  deps: LinkCompletionDeps,
  input: LinkProof & { connectionId?: string; organizationId: string; memberId: string },
): Promise<LinkCompletion> {
  const { db, secretKey, ingress, now } = deps;
  const verdict = await claimsOf(deps, 'token' in input ? { token: input.token } : { code: input.code });
  const claims = 'claims' in verdict ? verdict.claims : undefined;
  const connectionId = input.connectionId ?? claims?.connectionId;
  const unclaimed = !verdict.ok && verdict.reason === 'unknown' ? 'link_not_found' : 'invalid_link';
  if (connectionId === undefined) return { ok: false, error: unclaimed };
  const connection = await findSlackConnection(db, secretKey, connectionId);
  if (!connection || connection.uninstalled) return { ok: false, error: 'no_connection' };
  if (connection.organizationId !== input.organizationId) return { ok: false, error: 'other_organization' };
  if (!claims) return { ok: false, error: unclaimed };
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
