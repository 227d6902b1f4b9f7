/**
 * POST /v1/integrations/slack/{connectionId}/commands (and the `chatplatform` alias): a slash
 * command answered ephemerally. `/den` alone is the connect-your-account link, without Temporal;
 * `/den status`, `/den cancel` and `/den help` skip any queue and answer at once.
 */
import { randomUUID } from 'node:crypto';
import { errors } from '../../app/errors';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, OkFalse, PlainText } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { isSslCheck, parseSlashCommand } from '../envelope';
import { issueConnectGrant } from '../link-codes';
import { cancelFromSlack, slackRunStatus } from '../run-control';
import { cancelOutcomeText, connectAccountText, connectLinkUrl, DISABLED_CONNECTION_TEXT, HELP_TEXT, runStatusText } from '../texts';
import type { SignedBody } from '../verify';
import { ConnectionParams, type SlackRouteDeps } from './shared';

const COMMANDS_BODY_LIMIT = 100_000;

const SlashCommandResponse = z.object({ response_type: z.literal('ephemeral'), text: z.string() }).openapi('SlackSlashCommandResponse');

type CommandDeps = Pick<
  SlackRouteDeps,
  'settings' | 'platform' | 'db' | 'secretKey' | 'metrics' | 'now' | 'verifier' | 'ingress' | 'notices'
>;

const SUBCOMMANDS = ['status', 'cancel', 'help'] as const;
type Subcommand = (typeof SUBCOMMANDS)[number];

/** The subcommand the text names (its first word), or undefined for the connect link. */
function subcommandOf(text: string): Subcommand | undefined {
  const word = text.split(/\s+/)[0]?.toLowerCase() ?? '';
  return (SUBCOMMANDS as readonly string[]).includes(word) ? (word as Subcommand) : undefined;
}

const ephemeral = (text: string, reason: string): Reply => ({
  status: 200,
  body: { response_type: 'ephemeral', text },
  outcome: { outcome: 'acknowledged', reason },
});

/** Who ran a command: the connection, the Slack user, and the command's trigger id (Slack's, when it sent one). */
interface CommandCaller {
  connectionId: string;
  userId: string;
  triggerId: string | undefined;
}

/** `/den status`, `/den cancel`, `/den help`: the caller's runs, found through their linked member. */
async function subcommandReply(
  deps: CommandDeps,
  subcommand: Subcommand,
  { connectionId, userId, triggerId }: CommandCaller,
): Promise<Reply> {
  if (subcommand === 'help') return ephemeral(HELP_TEXT, 'help');
  if (subcommand === 'cancel') {
    const requestId = triggerId ?? randomUUID();
    const outcome = await cancelFromSlack(deps, { connectionId, slackUserId: userId, runId: null, requestId });
    return ephemeral(cancelOutcomeText(outcome), `cancel_${outcome}`);
  }
  const runs = await slackRunStatus(deps, { connectionId, slackUserId: userId });
  if (runs === 'not_linked') return ephemeral(cancelOutcomeText('not_linked'), 'status_not_linked');
  return ephemeral(runStatusText(runs, deps.now()), 'status');
}

async function postCommand(deps: CommandDeps, ctx: AppContext, { connectionId, rawBody }: SignedBody): Promise<Reply> {
  const { settings, secretKey, now } = deps;
  // A captured command replayed within the signature window would mint a new link token: refused.
  const connection = await deps.verifier.verifiedOnce(ctx, connectionId, rawBody);
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
  const subcommand = subcommandOf(command.text);
  if (subcommand) {
    return subcommandReply(deps, subcommand, { connectionId: connection.id, userId: command.userId, triggerId: command.triggerId });
  }
  // The team was checked against the connection's above.
  const { token, code } = await issueConnectGrant(
    { db: deps.db, secretKey },
    { connectionId: connection.id, teamId: command.teamId, slackUserId: command.userId, now: now(), ttlMs: settings.linkTokenTtlMs },
  );
  const url = settings.dashboardUrl === undefined ? undefined : connectLinkUrl(settings.dashboardUrl, token);
  return {
    status: 200,
    body: { response_type: 'ephemeral', text: connectAccountText({ url, code, ttlMs: settings.linkTokenTtlMs }) },
    outcome: { outcome: 'acknowledged', reason: 'connect_link' },
  };
}

export function createCommandsRoute(deps: CommandDeps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/{connectionId}/commands',
    aliases: ['/v1/integrations/chatplatform/{connectionId}/commands'],
    summary: 'Slack slash command request URL: answers with an ephemeral connect-your-account link, or the caller’s runs.',
    description:
      '`/den status` lists the caller’s active runs (status, age, channel), `/den cancel` asks their newest active run to stop, ' +
      '`/den help` lists the commands; any other text gets the ways to connect. ' +
      'Form-encoded and signed like events. The reply carries the command `npx den slack link <code>` (a 10-character code the ' +
      'member runs with their own API key) and, when DASHBOARD_URL is set, `<{DASHBOARD_URL}/connect/slack?token=…|Connect your account>`; ' +
      'the token and the code bind the connection, the workspace and the Slack user, expire in SLACK_LINK_TOKEN_TTL (10 min) and ' +
      'work once, either of them. The reply is answered without Temporal.',
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
    beforeBody: ({ params }, ctx) => deps.verifier.checkHeaders(ctx, params.connectionId),
    responses: {
      200: {
        description: 'Ephemeral reply with the ways to connect (spec 2.9); an empty body for `ssl_check=1`.',
        schema: z.union([SlashCommandResponse, z.literal('')]),
      },
      400: { description: 'Invalid connection id or form.', schema: InvalidRequestError },
      401: { description: 'No such installation, the signature is invalid, or the request is a replay.', schema: OkFalse },
      403: { description: 'team_id or api_app_id differs from the installation, or api_app_id is missing.', schema: OkFalse },
      413: { description: 'Body over 100,000 bytes.', schema: PlainText, contentType: 'text/plain' },
    },
    handler: ({ params, rawBody }, ctx) => postCommand(deps, ctx, { connectionId: params.connectionId, rawBody }),
  });
}
