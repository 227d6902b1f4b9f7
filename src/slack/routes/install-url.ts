/**
 * POST /v1/integrations/slack/connections/{connectionId}/install (admins): Slack's authorize page
 * for the connection's app, with the manifest's bot scopes, the callback's redirect URL and a
 * state that is signed, single-use, valid ten minutes and bound to the organization, the admin
 * and the connection (src/slack/install.ts). Slack hands the state back to the callback
 * (src/slack/routes/oauth-callback.ts) with the install's code.
 */
import { errors } from '../../app/errors';
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import { issueFlowState } from '../../app/install-flow';
import { getSlackConnectionView } from '../connections';
import { authorizeUrl, SLACK_INSTALL_FLOW } from '../install';
import { oauthRedirectUrl } from '../manifest';
import { connectionNotFound, connectionResponses, SLACK_TAGS } from './connection-shared';
import { ConnectionParams, type SlackRouteDeps } from './shared';

type Deps = Pick<SlackRouteDeps, 'db' | 'secretKey' | 'now' | 'settings' | 'platform'>;

const InstallLink = z
  .object({
    url: z.string().openapi({ example: 'https://slack.com/oauth/v2/authorize?client_id=…&scope=…&redirect_uri=…&state=…' }),
    expiresAt: z.string().openapi({ description: 'When the link’s state expires (ten minutes); it works once.' }),
  })
  .openapi('SlackInstallLink');

const CredentialsMissing = z.object({ error: z.literal('credentials_missing'), message: z.string() });

async function installLink(deps: Deps, principal: Principal, connectionId: string): Promise<Reply> {
  const connection = await getSlackConnectionView(deps.db, principal.organizationId, connectionId);
  if (!connection) throw connectionNotFound();
  if (!connection.hasCredentials || connection.clientId === null) {
    throw errors.conflict('credentials_missing', {
      message: 'Set the app’s client id, client secret and signing secret first (PUT …/credentials).',
    });
  }
  const { state, expiresAt } = await issueFlowState(deps, {
    purpose: SLACK_INSTALL_FLOW.purpose,
    organizationId: principal.organizationId,
    memberId: principal.memberId,
    subject: connectionId,
    ttlMs: SLACK_INSTALL_FLOW.ttlMs,
  });
  const url = authorizeUrl(deps.settings.authorizeUrl, {
    clientId: connection.clientId,
    redirectUri: oauthRedirectUrl(deps.platform.publicBaseUrl),
    state,
  });
  return { status: 200, body: { url, expiresAt: new Date(expiresAt).toISOString() } };
}

export function createSlackInstallUrlRoute(deps: Deps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/connections/{connectionId}/install',
    summary: "A link that installs the connection's Slack app in a workspace through Slack's OAuth (admins only)",
    description:
      'Open it in a browser signed in to the workspace: Slack asks to allow the app, then sends the browser to ' +
      '`GET /v1/integrations/slack/oauth/callback`, which stores the bot token and answers with a page. Installing again ' +
      'replaces the token.',
    tags: SLACK_TAGS,
    auth: 'admin',
    params: ConnectionParams,
    responses: {
      200: { description: 'The install link.', schema: InstallLink },
      409: {
        description: '`credentials_missing`: the client id, client secret and signing secret are not all set.',
        schema: CredentialsMissing,
      },
      ...connectionResponses,
    },
    handler: ({ principal, params }) => installLink(deps, principal, params.connectionId),
  });
}
