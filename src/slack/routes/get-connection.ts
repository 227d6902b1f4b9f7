/**
 * GET /v1/integrations/slack/connections/{connectionId} and …/manifest (admins): one connection
 * and its state, and its app manifest; another organization's is a 404 like a missing one.
 */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import { getSlackConnectionView } from '../connections';
import {
  connectionNotFound,
  connectionResponses,
  currentManifest,
  ManifestBody,
  presentConnections,
  SlackConnectionBody,
  SLACK_TAGS,
} from './connection-shared';
import { ConnectionParams, type SlackRouteDeps } from './shared';

type Deps = Pick<SlackRouteDeps, 'db' | 'settings' | 'platform'>;

/** Who asks, for which connection, and whether for the connection or its manifest. */
interface ConnectionRead {
  principal: Principal;
  connectionId: string;
  answer: 'connection' | 'manifest';
}

async function getConnection(deps: Deps, { principal, connectionId, answer }: ConnectionRead): Promise<Reply> {
  const connection = await getSlackConnectionView(deps.db, principal.organizationId, connectionId);
  if (!connection) throw connectionNotFound();
  if (answer === 'manifest') return { status: 200, body: { manifest: await currentManifest(deps, connection) } };
  return { status: 200, body: (await presentConnections(deps, [connection], true))[0] };
}

export function createGetConnectionRoute(deps: Deps): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/integrations/slack/connections/{connectionId}',
    summary: 'A Slack connection and its state (admins only)',
    tags: SLACK_TAGS,
    auth: 'admin',
    params: ConnectionParams,
    responses: { 200: { description: 'The connection; no secret or token.', schema: SlackConnectionBody }, ...connectionResponses },
    handler: ({ principal, params }) => getConnection(deps, { principal, connectionId: params.connectionId, answer: 'connection' }),
  });
}

export function createGetManifestRoute(deps: Deps): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/integrations/slack/connections/{connectionId}/manifest',
    summary: "A Slack connection's app manifest, every URL on this deployment (admins only)",
    tags: SLACK_TAGS,
    auth: 'admin',
    params: ConnectionParams,
    responses: { 200: { description: 'The manifest.', schema: z.object({ manifest: ManifestBody }) }, ...connectionResponses },
    handler: ({ principal, params }) => getConnection(deps, { principal, connectionId: params.connectionId, answer: 'manifest' }),
  });
}
