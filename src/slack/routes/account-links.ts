/**
 * POST /v1/integrations/slack/{connectionId}/account-links: completes a connect link, so the
 * token's Slack user becomes the calling member.
 */
import { AppError, errors } from '../../app/errors';
import type { Principal } from '../../app/http/auth';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import { completeLink, LINK_REFUSAL_STATUS, type LinkRefusal } from '../link-completion';
import { ConnectionParams, type SlackRouteDeps } from './shared';

const LinkBody = z.object({ token: z.string().max(4096) }).openapi('SlackAccountLinkRequest');
const LinkCreated = z.object({ slackUserId: z.string(), memberId: z.string() }).openapi('SlackAccountLink');
const LinkError = z.object({ error: z.string() });

type AccountLinkDeps = Pick<SlackRouteDeps, 'db' | 'secretKey' | 'ingress' | 'now'>;

/** The route's answer to each refusal; the codes' statuses are defined with completeLink. */
function linkRefusal(error: LinkRefusal): AppError {
  if (LINK_REFUSAL_STATUS[error] === 404) return errors.notFound('No such Slack connection.');
  return new AppError(error, LINK_REFUSAL_STATUS[error], { error });
}

async function postAccountLink(
  deps: AccountLinkDeps,
  ctx: AppContext,
  principal: Principal,
  connectionId: string,
  token: string,
): Promise<Reply> {
  const { db, secretKey, ingress, now } = deps;
  const outcome = await completeLink(
    { db, secretKey, ingress, now },
    { token, connectionId, organizationId: principal.organizationId, memberId: principal.memberId },
  );
  if (!outcome.ok) throw linkRefusal(outcome.error);
  ctx.state.log.info({ connectionId: outcome.connectionId, memberId: outcome.memberId, resumed: outcome.resumed }, 'slack account linked');
  return { status: 201, body: { slackUserId: outcome.slackUserId, memberId: outcome.memberId } };
}

export function createAccountLinksRoute(deps: AccountLinkDeps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/{connectionId}/account-links',
    summary: "Completes a connect link: the token's Slack user becomes the calling member.",
    description:
      "Called by the page behind the slash command's link, as the signed-in member. Invocations of that Slack user " +
      'that are waiting for the link continue at once.',
    tags: ['Slack'],
    auth: 'authenticated',
    params: ConnectionParams,
    body: { kind: 'json', schema: LinkBody, limitBytes: 16_384 },
    responses: {
      201: { description: 'Linked.', schema: LinkCreated },
      400: {
        description: '`{error:"invalid_link"}` for a forged or malformed token; InvalidRequestError for a bad body.',
        schema: LinkError,
      },
      401: { description: 'Not authenticated.', schema: LinkError },
      404: { description: "No such connection in the caller's organization (another organization's answers the same).", schema: LinkError },
      409: {
        description: '`link_used` (token already redeemed) or `already_linked` (the Slack user is linked to another member).',
        schema: LinkError,
      },
      410: { description: '`link_expired`.', schema: LinkError },
      503: { description: 'Postgres or Temporal unavailable; nothing was recorded, retry.' },
    },
    handler: ({ params, body, principal }, ctx) => postAccountLink(deps, ctx, principal, params.connectionId, body.token),
  });
}
