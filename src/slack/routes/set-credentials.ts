/**
 * PUT /v1/integrations/slack/connections/{connectionId}/credentials (admins): the app's client
 * id, client secret and signing secret from its *Basic Information* page, sealed like every
 * stored secret and never returned. From now on its signed requests verify, so Slack's *Retry*
 * of the events Request URL check succeeds.
 */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import { getSlackConnectionView, setSlackCredentials } from '../connections';
import { connectionNotFound, connectionResponses, presentConnections, SlackConnectionBody, SLACK_TAGS } from './connection-shared';
import { ConnectionParams, type SlackRouteDeps } from './shared';

type Deps = Pick<SlackRouteDeps, 'db' | 'secretKey' | 'now' | 'verifier' | 'settings' | 'platform'>;

/** Slack's secrets are hex; letters and digits are accepted, so a paste with a space or a quote in it is caught. */
const Secret = z.string().regex(/^[A-Za-z0-9]{16,128}$/, 'Must be the value Slack shows: 16 to 128 letters and digits.');

const CredentialsRequest = z
  .object({
    clientId: z
      .string()
      .regex(/^[0-9]{1,30}\.[0-9]{1,30}$/, 'Must be the Client ID Slack shows: digits, a dot, digits.')
      .openapi({ example: '1234567890.1234567890123' }),
    clientSecret: Secret,
    signingSecret: Secret,
  })
  .strict()
  .openapi('SlackConnectionCredentials');

/** An admin's credentials: who sets them, on which connection, and what they are. */
interface CredentialsSet {
  principal: Principal;
  connectionId: string;
  body: z.output<typeof CredentialsRequest>;
}

async function setCredentials(deps: Deps, { principal, connectionId, body }: CredentialsSet): Promise<Reply> {
  if (!(await getSlackConnectionView(deps.db, principal.organizationId, connectionId))) throw connectionNotFound();
  const connection = await setSlackCredentials(deps, { connectionId, credentials: body, now: new Date(deps.now()) });
  if (!connection) throw connectionNotFound();
  deps.verifier.forget(connectionId);
  return { status: 200, body: (await presentConnections(deps, [connection], true))[0] };
}

export function createSetCredentialsRoute(deps: Deps): Route {
  return defineRoute({
    method: 'put',
    path: '/v1/integrations/slack/connections/{connectionId}/credentials',
    summary: "Set a Slack connection's client id, client secret and signing secret (admins only; never returned)",
    description:
      'From the app’s *Basic Information* page. A new signing secret counts at once and the old one stops. Then press *Retry* ' +
      'under *Event Subscriptions* in Slack, and install the app (`POST …/install`).',
    tags: SLACK_TAGS,
    auth: 'admin',
    params: ConnectionParams,
    body: { kind: 'json', schema: CredentialsRequest, limitBytes: 16_384 },
    responses: { 200: { description: 'The connection (no secret).', schema: SlackConnectionBody }, ...connectionResponses },
    handler: ({ principal, params, body }) => setCredentials(deps, { principal, connectionId: params.connectionId, body }),
  });
}
