/**
 * POST /v1/integrations/slack/{connectionId}/interactions (and the `chatplatform` alias): Slack's
 * interactivity request URL. The Cancel button on an invocation's message asks its run to stop,
 * for the run's member or an admin of the organization; anyone else is told so, ephemerally.
 * Checks in the order of the other Slack routes: connection, size, installation, signature,
 * payload, team/app. Answered within Slack's 3 s: the cancel is taken once the run accepts it
 * (its Update's validator), not when the run has recorded it, and the clicker is answered through
 * the interaction's `response_url`, which works even where the bot has left the channel.
 */
import { randomUUID } from 'node:crypto';
import { errors } from '../../app/errors';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, OkFalse, PlainText } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import type { SlackConnection } from '../connections';
import { parseInteraction, type BlockActions } from '../envelope';
import { CANCEL_ACTION_ID } from '../progress';
import { cancelFromSlack } from '../run-control';
import { cancelOutcomeText } from '../texts';
import { dueBotToken } from '../tokens';
import type { SignedBody } from '../verify';
import { callSlackApi, postResponseUrl } from '../web-api';
import { ConnectionParams, type SlackRouteDeps } from './shared';

const INTERACTIONS_BODY_LIMIT = 100_000;

type InteractionDeps = Pick<
  SlackRouteDeps,
  'settings' | 'platform' | 'db' | 'secretKey' | 'metrics' | 'now' | 'verifier' | 'ingress' | 'notices' | 'log'
>;

/** The empty 200 Slack expects for a block action (its answer goes elsewhere). */
const ack = (reason: string, outcome: 'acknowledged' | 'ineligible' = 'acknowledged'): Reply => ({
  status: 200,
  body: '',
  outcome: { outcome, reason },
});

/** A click on the Cancel button: the connection it came through, and Slack's payload. */
interface CancelClick {
  connection: SlackConnection;
  interaction: BlockActions;
}

async function postInteraction(deps: InteractionDeps, ctx: AppContext, { connectionId, rawBody }: SignedBody): Promise<Reply> {
  const connection = await deps.verifier.verifiedOnce(ctx, connectionId, rawBody);
  const parsed = parseInteraction(rawBody);
  if (!parsed.ok) throw errors.invalidRequest(parsed.details);
  const interaction = parsed.interaction;
  // Like a command, an interaction must name this installation's workspace and app.
  if (interaction.teamId !== connection.teamId || interaction.apiAppId !== connection.apiAppId) {
    throw errors.webhook('installation_mismatch', 403);
  }
  if (!('actions' in interaction)) return ack('not_block_actions', 'ineligible');
  const cancel = interaction.actions.find((action) => action.actionId === CANCEL_ACTION_ID);
  if (!cancel) return ack('no_known_action', 'ineligible');
  if (!connection.enabled) return ack('connection_disabled', 'ineligible');
  const request = {
    connectionId: connection.id,
    slackUserId: interaction.userId,
    runId: cancel.value ?? null,
    requestId: interaction.triggerId ?? randomUUID(),
  };
  const outcome = await cancelFromSlack(deps, request);
  const click = { connection, interaction };
  tell(deps, click, cancelOutcomeText(outcome));
  // Not known yet whether the run took it: the same request again (the same Update), after the ack.
  if (outcome === 'unconfirmed') void confirmLater(deps, click, request);
  return ack(`cancel_${outcome}`);
}

/** How long an unconfirmed cancel is asked again, after the ack, before the clicker is told it could not be confirmed. */
const CONFIRM_TIMEOUT_MS = 20_000;

/** Asks the run again with the same Update id; tells the clicker only what changes what they were told. */
async function confirmLater(deps: InteractionDeps, click: CancelClick, request: Parameters<typeof cancelFromSlack>[1]): Promise<void> {
  const outcome = await cancelFromSlack(deps, { ...request, timeoutMs: CONFIRM_TIMEOUT_MS }).catch(() => 'unconfirmed' as const);
  if (outcome === 'requested') return;
  tell(deps, click, cancelOutcomeText(outcome === 'unconfirmed' ? 'failed' : outcome));
}

/**
 * The clicker's answer, seen only by them: through the interaction's `response_url` (only to
 * Slack's hooks, SLACK_RESPONSE_URL_PREFIX), else an ephemeral message in the thread. Not
 * awaited: the route answers Slack within 3 s whatever Slack does with it; a failure is logged.
 */
function tell(deps: InteractionDeps, { connection, interaction }: CancelClick, text: string): void {
  const prefix = deps.settings.responseUrlPrefix;
  if (interaction.responseUrl?.startsWith(prefix)) {
    void postResponseUrl(prefix, interaction.responseUrl, { text, response_type: 'ephemeral', replace_original: false }).then((result) => {
      if (!result.ok)
        deps.log.warn({ connectionId: connection.id, error: result.error }, 'slack response_url answer to an interaction failed');
    });
    return;
  }
  const botToken = connection.botToken;
  if (!botToken || !interaction.channelId) return;
  const body = {
    channel: interaction.channelId,
    user: interaction.userId,
    text,
    ...(interaction.threadTs ? { thread_ts: interaction.threadTs } : {}),
  };
  const baseUrl = deps.settings.apiBaseUrl;
  void dueBotToken({ db: deps.db, secretKey: deps.secretKey, apiBaseUrl: baseUrl, log: deps.log }, { ...connection, botToken })
    .then((token) => callSlackApi({ baseUrl, token }, 'chat.postEphemeral', body))
    .then((result) => {
      if (!result.ok)
        deps.log.warn({ connectionId: connection.id, error: result.error }, 'slack ephemeral answer to an interaction failed');
    })
    .catch((error: unknown) =>
      deps.log.warn({ connectionId: connection.id, err: error }, 'slack ephemeral answer to an interaction failed'),
    );
}

export function createInteractionsRoute(deps: InteractionDeps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/{connectionId}/interactions',
    aliases: ['/v1/integrations/chatplatform/{connectionId}/interactions'],
    summary: "Slack interactivity request URL: the Cancel button on an invocation's message.",
    description:
      'Form-encoded (`payload` holds the JSON) and signed like events. A `block_actions` payload whose action is the Cancel button ' +
      "asks the run (the button's value) to stop, when the Slack user is linked to the run's member or to an admin of its " +
      'organization; the clicker gets an ephemeral answer either way. Always an empty 200 once verified.',
    tags: ['Slack'],
    auth: 'signature',
    ingress: true,
    params: ConnectionParams,
    body: {
      kind: 'raw',
      limitBytes: INTERACTIONS_BODY_LIMIT,
      contentType: 'application/x-www-form-urlencoded',
      description:
        'The interaction form: `payload`, a JSON interaction payload (type `block_actions`, team, api_app_id, user, actions, …).',
    },
    beforeBody: ({ params }, ctx) => deps.verifier.checkHeaders(ctx, params.connectionId),
    responses: {
      200: { description: 'Taken (empty body); the answer to the clicker is an ephemeral message.', schema: z.literal('') },
      400: { description: 'Invalid connection id, or a form without a valid `payload`.', schema: InvalidRequestError },
      401: { description: 'No such installation, the signature is invalid, or the request is a replay.', schema: OkFalse },
      403: { description: 'team.id or api_app_id differs from the installation, or api_app_id is missing.', schema: OkFalse },
      413: { description: 'Body over 100,000 bytes.', schema: PlainText, contentType: 'text/plain' },
    },
    handler: ({ params, rawBody }, ctx) => postInteraction(deps, ctx, { connectionId: params.connectionId, rawBody }),
  });
}
