import { Command, InvalidArgumentError } from 'commander';
import {
  CONNECTION_ID_PATTERN,
  createSlackConnection,
  listSlackConnections,
  SlackConnectionError,
  updateSlackConnection,
  type CreateSlackConnectionInput,
  type UpdateSlackConnectionInput,
} from './connections';
import type { TokenRotation } from './web-api';
import { CliError, print, type CliContext } from '../app/cli';
import { liveMember } from '../identity';
import { completeLink, LINK_REFUSAL_STATUS } from './link-completion';
import { removeConnection } from './removal';
import type { SlackSettings } from './settings';

/** Slack ids (T…, A…, U…, C…) are upper-case letters and digits. */
function slackId(kind: string) {
  return (value: string): string => {
    if (!/^[A-Z0-9]{2,32}$/.test(value)) throw new InvalidArgumentError(`must be a Slack ${kind} id (upper-case letters and digits)`);
    return value;
  };
}

function channels(value: string): string[] {
  const list = value
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean);
  for (const channel of list) {
    if (!/^[A-Z0-9]{2,32}$/.test(channel)) throw new InvalidArgumentError(`"${channel}" is not a Slack channel id`);
  }
  return list;
}

function boolean(value: string): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new InvalidArgumentError('must be true or false');
}

function nonEmpty(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('must not be empty');
  return value;
}

function nonNegativeHours(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 24 * 365) throw new InvalidArgumentError('must be a number of hours, 0 or more');
  return n;
}

function wholeSeconds(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 366 * 86_400) throw new InvalidArgumentError('must be a whole number of seconds, 1 or more');
  return n;
}

/**
 * A rotating bot token's options (an app with token rotation on): its refresh token and its
 * lifetime as Slack gave them (`expires_in`), together or not at all, and only with the token itself.
 */
function rotationOption(opts: { botToken?: string; refreshToken?: string; tokenExpiresIn?: number }): TokenRotation | undefined {
  if (opts.refreshToken === undefined && opts.tokenExpiresIn === undefined) return undefined;
  if (opts.refreshToken === undefined || opts.tokenExpiresIn === undefined || !opts.botToken) {
    throw new CliError('--refresh-token and --token-expires-in go together, with the --bot-token they belong to');
  }
  return { refreshToken: opts.refreshToken, expiresInMs: opts.tokenExpiresIn * 1000 };
}

function connectionId(value: string): string {
  if (!CONNECTION_ID_PATTERN.test(value)) throw new CliError(`"${value}" is not a Slack connection id (emc_…)`);
  return value;
}

/** Store errors are the operator's input errors: printed as such, not as a stack. */
async function operatorErrors<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof SlackConnectionError) throw new CliError(error.message);
    throw error;
  }
}

export function registerSlackCommands(program: Command, context: CliContext<SlackSettings>): void {
  const slack = program.command('slack').description('Slack integration.');
  const connections = slack.command('connections').description('Slack app installations (one per workspace and app).');
  registerCreateConnection(connections, context);
  registerUpdateConnection(connections, context);
  registerDeleteConnection(connections, context);
  connections
    .command('list')
    .description("An organization's Slack connections (no secrets).")
    .requiredOption('--org <organizationId>', 'organization id')
    .action((opts: { org: string }) => context.withDatabase(async ({ db }) => print(await listSlackConnections(db, opts.org))));

  const links = slack.command('links').description('Links between Slack users and members (what a connect page completes).');
  registerCompleteLink(links, context);
}

function registerCreateConnection(connections: Command, context: CliContext<SlackSettings>): void {
  connections
    .command('create')
    .description('Register a Slack app installation. Secrets are stored encrypted. Prints {connectionId}.')
    .requiredOption('--org <organizationId>', 'organization that owns the connection')
    .requiredOption('--team-id <T>', 'Slack workspace (team) id', slackId('team'))
    .requiredOption('--app-id <A>', 'Slack app id (api_app_id)', slackId('app'))
    .requiredOption('--signing-secret <s>', "the app's signing secret", nonEmpty)
    .option('--bot-token <t>', 'bot token (xoxb-…, or xoxe.xoxb-… with token rotation on), needed to post replies and connect prompts')
    .option('--refresh-token <t>', 'with token rotation on: the refresh token (xoxe-…) Slack issued with the bot token')
    .option('--token-expires-in <seconds>', "with token rotation on: the bot token's lifetime, Slack's expires_in", wholeSeconds)
    .option('--client-id <id>', "the app's client id (a rotating token is refreshed with it)", nonEmpty)
    .option('--client-secret <s>', "the app's client secret (a rotating token is refreshed with it)", nonEmpty)
    .option('--enterprise-id <E>', "an Enterprise Grid org-wide install: the organization's id", slackId('enterprise'))
    .option('--bot-user-id <U>', "the bot's own user id; its messages are never routed", slackId('user'))
    .option('--channels <C1,C2>', 'channel allowlist (DMs are always allowed)', channels)
    .option('--disabled', 'create it disabled')
    .action((opts: CreateOptions) =>
      context.withDatabase(async ({ db, secretKey }) =>
        operatorErrors(async () => print(await createSlackConnection({ db, secretKey: await secretKey() }, createInput(opts)))),
      ),
    );
}

interface CreateOptions {
  org: string;
  teamId: string;
  appId: string;
  signingSecret: string;
  botToken?: string;
  refreshToken?: string;
  tokenExpiresIn?: number;
  clientId?: string;
  clientSecret?: string;
  enterpriseId?: string;
  botUserId?: string;
  channels?: string[];
  disabled?: boolean;
}

/** What `create` stores; a rotating token needs the client credentials its refresh is made with. */
function createInput(opts: CreateOptions): CreateSlackConnectionInput {
  const rotation = rotationOption(opts);
  if (rotation && (opts.clientId === undefined || opts.clientSecret === undefined)) {
    throw new CliError('a rotating token (--refresh-token) needs --client-id and --client-secret to be refreshed with');
  }
  return {
    organizationId: opts.org,
    teamId: opts.teamId,
    apiAppId: opts.appId,
    signingSecret: opts.signingSecret,
    botToken: opts.botToken,
    rotation,
    clientId: opts.clientId,
    clientSecret: opts.clientSecret,
    enterpriseId: opts.enterpriseId,
    botUserId: opts.botUserId,
    channels: opts.channels,
    enabled: !opts.disabled,
  };
}

function registerUpdateConnection(connections: Command, context: CliContext<SlackSettings>): void {
  connections
    .command('update <id>')
    .description('Enable or disable a connection, rotate its signing secret, or change its channel allowlist.')
    .option('--enabled <true|false>', 'enable or disable routing', boolean)
    .option('--signing-secret <s>', 'the new signing secret', nonEmpty)
    .option(
      '--previous-secret-valid-hours <n>',
      'with --signing-secret: keep accepting the old secret for n hours (default 0)',
      nonNegativeHours,
    )
    .option('--channels <C1,C2>', 'replace the channel allowlist ("" clears it)', channels)
    .option('--bot-token <t>', 'replace the bot token ("" removes it); without --refresh-token it never expires')
    .option('--refresh-token <t>', "with --bot-token, for an app with token rotation on: the token's refresh token")
    .option('--token-expires-in <seconds>', "with --refresh-token: the bot token's lifetime, Slack's expires_in", wholeSeconds)
    .option('--bot-user-id <U>', "replace the bot's user id")
    .action((id: string, opts: UpdateSlackConnectionInput & { refreshToken?: string; tokenExpiresIn?: number }) =>
      context.withDatabase(async ({ db, secretKey }) => {
        connectionId(id);
        if (opts.previousSecretValidHours !== undefined && opts.signingSecret === undefined) {
          throw new CliError('--previous-secret-valid-hours only applies together with --signing-secret');
        }
        if (Object.values(opts).every((v) => v === undefined)) throw new CliError('nothing to update: pass at least one option');
        const { refreshToken: _r, tokenExpiresIn: _e, ...update } = opts;
        const input = { ...update, rotation: rotationOption(opts) };
        await operatorErrors(async () =>
          print(await updateSlackConnection({ db, secretKey: await secretKey() }, { connectionId: id, change: input })),
        );
      }),
    );
}

function registerDeleteConnection(connections: Command, context: CliContext<SlackSettings>): void {
  connections
    .command('delete <id>')
    .description(
      'Revoke the bot token at Slack (auth.revoke), then remove the connection, its member links and its invocations waiting ' +
        'for a link, as the API’s DELETE does. Needs Temporal (TEMPORAL_ADDRESS, else a running `npm start`). Prints what was removed.',
    )
    .requiredOption('--org <organizationId>', 'the organization that owns the connection')
    .action((id: string, opts: { org: string }) =>
      context.withTemporal(async ({ db, secretKey, ingress }) => {
        connectionId(id);
        const outcome = await removeConnection({ db, secretKey: await secretKey(), ingress, settings: context.settings() }, opts.org, id);
        if (!outcome.ok && outcome.reason === 'not_found')
          throw new CliError(`Slack connection ${id} not found in organization ${opts.org}`);
        if (!outcome.ok) throw new CliError(`Slack could not revoke the bot token (${outcome.error}); nothing was removed`);
        const { ok: _ok, ...removed } = outcome;
        print({ connectionId: id, ...removed });
      }),
    );
}

function registerCompleteLink(links: Command, context: CliContext<SlackSettings>): void {
  links
    .command('complete')
    .description(
      'Complete a connect link for a member, exactly as the account-links route does, for deployments without a ' +
        'dashboard. Needs Temporal (TEMPORAL_ADDRESS, else the embedded dev server of a running `npm start`), so ' +
        'invocations waiting for the link resume. Prints {connectionId, slackUserId, memberId, resumed}.',
    )
    .requiredOption('--token <token>', 'the token of the connect link (the `token` query parameter)', nonEmpty)
    .requiredOption('--member <memberId>', 'the member the Slack user becomes', nonEmpty)
    .action((opts: { token: string; member: string }) =>
      context.withTemporal(async ({ db, secretKey, ingress }) => {
        const member = await liveMember(db, opts.member);
        const outcome = await completeLink(
          { db, secretKey: await secretKey(), ingress, now: () => Date.now() },
          { token: opts.token, organizationId: member.organization_id, memberId: member.id },
        );
        if (!outcome.ok)
          throw new CliError(`link not completed: ${outcome.error} (the API would answer ${LINK_REFUSAL_STATUS[outcome.error]})`);
        const { ok: _ok, ...result } = outcome;
        print(result);
      }),
    );
}
