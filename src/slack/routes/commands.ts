/**
 * POST /v1/integrations/slack/{connectionId}/commands (and the `chatplatform` alias): a slash
 * command answered with an ephemeral connect-your-account link, without Temporal.
 */
import { errors } from '../../app/errors';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, OkFalse, PlainText } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { isSslCheck, parseSlashCommand } from '../envelope';
import { createLinkToken } from '../link-token';
import { connectAccountText, connectLinkUrl, DISABLED_CONNECTION_TEXT } from '../texts';
import { knownConnection, verifiedOnce } from '../verify';
import { ConnectionParams, type SlackRouteDeps } from './shared';

const COMMANDS_BODY_LIMIT = 100_000;

const SlashCommandResponse = z.object({ response_type: z.literal('ephemeral'), text: z.string() }).openapi('SlackSlashCommandResponse');

type CommandDeps = Pick<SlackRouteDeps, 'settings' | 'platform' | 'db' | 'secretKey' | 'metrics' | 'now' | 'guard'>;

async function postCommand(deps: CommandDeps, ctx: AppContext, connectionId: string, rawBody: Buffer): Promise<Reply> {
  const { settings, platform, db, secretKey, metrics, now, guard } = deps;
  // A captured command replayed within the signature window would mint a new link token: refused.
  const connection = await verifiedOnce({ db, secretKey, metrics, now, guard }, ctx, connectionId, rawBody);
  // Slack checks the request URL's certificate with a signed `ssl_check=1` that has no team or
  // user: answered 200 with an empty body before any other command check.
  if (isSslCheck(rawBody)) return { status: 200, body: '', outcome: { outcome: 'acknowledged', reason: 'ssl_check' } };
  const parsed = parseSlashCommand(rawBody);
  if (!parsed.ok) throw errors.invalidRequest(parsed.details);
  const command = parsed.command;
  // A command must name this installation's workspace and app: a missing api_app_id fails the
  // check like a wrong one (it cannot prove which app it was meant for).
  if (command.teamId !== connection.teamId || command.apiAppId !== connection.apiAppId) {
    throw errors.webhook('installation_mismatch', 403);
  }
  if (!connection.enabled) {
    return {
      status: 200,
      body: { response_type: 'ephemeral', text: DISABLED_CONNECTION_TEXT },
      outcome: { outcome: 'ineligible', reason: 'connection_disabled' },
    };
  }
  const { token } = createLinkToken(secretKey, {
    connectionId: connection.id,
    teamId: connection.teamId,
    slackUserId: command.userId,
    now: now(),
    ttlMs: settings.linkTokenTtlMs,
  });
  const url = connectLinkUrl(platform.publicBaseUrl, token);
  return {
    status: 200,
    body: { response_type: 'ephemeral', text: connectAccountText(url, settings.linkTokenTtlMs) },
    outcome: { outcome: 'acknowledged', reason: 'connect_link' },
  };
}

export function createCommandsRoute(deps: CommandDeps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/{connectionId}/commands',
    aliases: ['/v1/integrations/chatplatform/{connectionId}/commands'],
    summary: 'Slack slash command request URL: answers with an ephemeral connect-your-account link.',
    description:
      'Form-encoded and signed like events. The reply carries `<{APP_BASE_URL}/connect/slack?token=…|Connect your account>`; ' +
      'the token binds the connection, the workspace and the Slack user, expires in SLACK_LINK_TOKEN_TTL (10 min) and works once. ' +
      'Answered without Temporal.',
    tags: ['Slack'],
    auth: 'signature',
    ingress: true,
    params: ConnectionParams,
    body: {
      kind: 'raw',
      limitBytes: COMMANDS_BODY_LIMIT,
      contentType: 'application/x-www-form-urlencoded',
      description: 'The slash command form (team_id, api_app_id, user_id, command, …).',
    },
    beforeBody: ({ params }, ctx) => knownConnection(deps, ctx, params.connectionId).then(() => undefined),
    responses: {
      200: {
        description: 'Ephemeral reply with the connect link (spec 2.9); an empty body for `ssl_check=1`.',
        schema: z.union([SlashCommandResponse, z.literal('')]),
      },
      400: { description: 'Invalid connection id or form.', schema: InvalidRequestError },
      401: { description: 'No such installation, the signature is invalid, or the request is a replay.', schema: OkFalse },
      403: { description: 'team_id or api_app_id differs from the installation, or api_app_id is missing.', schema: OkFalse },
      413: { description: 'Body over 100,000 bytes.', schema: PlainText, contentType: 'text/plain' },
    },
    handler: ({ params, rawBody }, ctx) => postCommand(deps, ctx, params.connectionId, rawBody),
  });
}
