/** GET /v1/integrations/slack/connections (admins): the organization's Slack connections and their states, never a secret. */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { authResponses } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { listSlackConnections } from '../connections';
import { presentConnections, SlackConnectionBody, SLACK_TAGS } from './connection-shared';
import type { SlackRouteDeps } from './shared';

type Deps = Pick<SlackRouteDeps, 'db' | 'settings' | 'platform'>;

async function listConnections(deps: Deps, principal: Principal): Promise<Reply> {
  const connections = await listSlackConnections(deps.db, principal.organizationId);
  return { status: 200, body: { connections: await presentConnections(deps, connections) } };
}

export function createListConnectionsRoute(deps: Deps): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/integrations/slack/connections',
    summary: "The organization's Slack connections, oldest first, with their states (admins only)",
    tags: SLACK_TAGS,
    auth: 'admin',
    responses: {
      200: {
        description: 'The connections; no secret or token is ever returned.',
        schema: z.object({ connections: z.array(SlackConnectionBody) }),
      },
      ...authResponses,
    },
    handler: ({ principal }) => listConnections(deps, principal),
  });
}
