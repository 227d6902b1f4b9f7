/**
 * DELETE /v1/integrations/slack/connections/{connectionId} (admins): revokes the bot token at
 * Slack (`auth.revoke`), then removes the connection, its member links and its waiting
 * invocations (src/slack/removal.ts). Its next signed request is answered as for a connection
 * that never existed, at once in every process: each request reads its connection fresh.
 */
import { AppError } from '../../app/errors';
import type { Principal } from '../../app/http/auth';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import { removeConnection } from '../removal';
import { connectionNotFound, connectionResponses, SLACK_TAGS } from './connection-shared';
import { ConnectionParams, type SlackRouteDeps } from './shared';

type Deps = Pick<SlackRouteDeps, 'db' | 'secretKey' | 'ingress' | 'settings' | 'verifier'>;

const SlackUnavailable = z.object({ error: z.literal('slack_unavailable'), message: z.string() });

async function remove(
  deps: Deps,
  ctx: AppContext,
  { principal, connectionId }: { principal: Principal; connectionId: string },
): Promise<Reply> {
  const outcome = await removeConnection(deps, principal.organizationId, connectionId);
  if (!outcome.ok && outcome.reason === 'not_found') throw connectionNotFound();
  if (!outcome.ok) {
    ctx.state.log.warn(
      { connectionId, error: outcome.reason === 'slack_unavailable' ? outcome.error : undefined },
      'slack connection not removed: auth.revoke failed',
    );
    throw new AppError('slack_unavailable', 502, {
      body: { error: 'slack_unavailable', message: 'Slack could not revoke the bot token; nothing was removed. Try again.' },
    });
  }
  deps.verifier.forget(connectionId);
  ctx.state.log.info({ connectionId, token: outcome.token, links: outcome.links, waiting: outcome.waiting }, 'slack connection removed');
  return { status: 204 };
}

export function createDeleteConnectionRoute(deps: Deps): Route {
  return defineRoute({
    method: 'delete',
    path: '/v1/integrations/slack/connections/{connectionId}',
    summary: 'Revoke a Slack connection’s bot token and remove it, its member links and its waiting invocations (admins only)',
    tags: SLACK_TAGS,
    auth: 'admin',
    params: ConnectionParams,
    responses: {
      204: { description: 'Revoked and removed.' },
      502: { description: '`slack_unavailable`: Slack did not revoke the token; nothing was removed.', schema: SlackUnavailable },
      ...connectionResponses,
    },
    handler: ({ principal, params }, ctx) => remove(deps, ctx, { principal, connectionId: params.connectionId }),
  });
}
