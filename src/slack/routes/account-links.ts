/**
 * POST /v1/integrations/slack/{connectionId}/account-links and POST /v1/integrations/slack/account-links:
 * completes a connect link, so the Slack user it was made for becomes the calling member. The
 * dashboard's page posts the link's `token`; `den slack link <code>`, run by the member with their
 * own API key, posts the `code` of the same reply to the second route, which needs no connection id.
 */
import { AppError, errors } from '../../app/errors';
import type { Principal } from '../../app/http/auth';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import { TYPED_LINK_CODE } from '../link-codes';
import { completeLink, LINK_REFUSAL_STATUS, type LinkProof, type LinkRefusal } from '../link-completion';
import { LINK_TOKEN_SHAPE } from '../link-token';
import { ConnectionParams, type SlackRouteDeps } from './shared';

const Token = z
  .object({ token: z.string().max(4096).regex(LINK_TOKEN_SHAPE).openapi({ description: "The connect link's token." }) })
  .strict();
const Code = z
  .object({
    code: z.string().max(40).regex(TYPED_LINK_CODE).openapi({
      description: 'The code of the connect reply (`ABCDE-FGHJK`; case, dashes and spaces do not matter).',
      example: 'K7M2Q-9XWZ4',
    }),
  })
  .strict();
const LinkBody = z.union([Token, Code]).openapi('SlackAccountLinkRequest');
const CodeBody = Code.openapi('SlackAccountLinkCodeRequest');
const LinkCreated = z.object({ connectionId: z.string(), slackUserId: z.string(), memberId: z.string() }).openapi('SlackAccountLink');
const LinkError = z.object({ error: z.string() });
/** Room for a token just over its 4,096 characters even in 4-byte UTF-8, so that one is refused by its schema (400), not its size. */
const BODY_LIMIT = 65_536;

type AccountLinkDeps = Pick<SlackRouteDeps, 'db' | 'secretKey' | 'ingress' | 'now'>;

/** The route's answer to each refusal; the codes' statuses are defined with completeLink. */
function linkRefusal(error: LinkRefusal): AppError {
  if (error === 'no_connection' || error === 'other_organization') return errors.notFound('No such Slack connection.');
  return new AppError(error, LINK_REFUSAL_STATUS[error], { body: { error } });
}

/** A member's link: who asks, the token or code they hold, and the connection the path names (none for a code alone). */
interface LinkRequest {
  principal: Principal;
  proof: LinkProof;
  connectionId?: string;
}

async function postAccountLink(deps: AccountLinkDeps, ctx: AppContext, { principal, proof, connectionId }: LinkRequest): Promise<Reply> {
  const { db, secretKey, ingress, now } = deps;
  const outcome = await completeLink(
    { db, secretKey, ingress, now },
    { ...proof, connectionId, organizationId: principal.organizationId, memberId: principal.memberId },
  );
  if (!outcome.ok) throw linkRefusal(outcome.error);
  ctx.state.log.info({ connectionId: outcome.connectionId, memberId: outcome.memberId, resumed: outcome.resumed }, 'slack account linked');
  return { status: 201, body: { connectionId: outcome.connectionId, slackUserId: outcome.slackUserId, memberId: outcome.memberId } };
}

const responses = {
  201: { description: 'Linked.', schema: LinkCreated },
  400: {
    description:
      'InvalidRequestError for a body that is not a token or a code; `{error:"invalid_link"}` for a genuine token or code of another connection or workspace.',
    schema: LinkError,
  },
  401: { description: 'Not authenticated.', schema: LinkError },
  404: {
    description:
      '`{error:"link_not_found"}` for a well-formed token or code this service never issued; `not_found` when there is no such connection in the caller\'s organization (another organization\'s answers the same).',
    schema: LinkError,
  },
  409: {
    description:
      '`link_used` (the token or code, or the other of the same reply, was already redeemed) or `already_linked` (the Slack user is linked to another member).',
    schema: LinkError,
  },
  410: { description: '`link_expired`.', schema: LinkError },
  503: { description: 'Postgres or Temporal unavailable; nothing was recorded, retry.' },
};

export function createAccountLinksRoute(deps: AccountLinkDeps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/{connectionId}/account-links',
    summary: "Completes a connect link: the token's (or code's) Slack user becomes the calling member.",
    description:
      "Called by the dashboard's page behind the slash command's link, as the signed-in member. Invocations of that Slack user " +
      'that are waiting for the link continue at once.',
    tags: ['Slack'],
    auth: 'authenticated',
    params: ConnectionParams,
    body: { kind: 'json', schema: LinkBody, limitBytes: BODY_LIMIT },
    responses,
    handler: ({ params, body, principal }, ctx) =>
      postAccountLink(deps, ctx, { principal, proof: body, connectionId: params.connectionId }),
  });
}

export function createLinkCodeRoute(deps: AccountLinkDeps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/account-links',
    summary: "Completes a connect link by its code: the code's Slack user becomes the calling member.",
    description:
      'What `npx den slack link <code>` calls with the member’s own API key (`DEN_API_KEY`): the code names its connection. ' +
      'Invocations of that Slack user that are waiting for the link continue at once.',
    tags: ['Slack'],
    auth: 'authenticated',
    body: { kind: 'json', schema: CodeBody, limitBytes: BODY_LIMIT },
    responses,
    handler: ({ body, principal }, ctx) => postAccountLink(deps, ctx, { principal, proof: { code: body.code } }),
  });
}
