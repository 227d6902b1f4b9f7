/**
 * Slack test kit: a fake Slack Web API on 127.0.0.1 that records every call, requests signed
 * for real with a connection's signing secret, and connections made through the same store
 * functions the CLI uses.
 */
import { randomUUID } from 'node:crypto';
import { createSlackConnection } from '../../src/slack/connections';
import { slackMessageWorkflowId } from '../../src/slack/contract';
import { signSlackRequest } from '../../src/slack/signature';
import type { Db } from '../../src/app/store/db';
import type { SecretKeys } from '../../src/app/secrets';
import { createTestOrg } from './identity';
import { startTestStack, type HttpTarget, type TestResponse, type TestStack } from './stack';
import { startFakeSlack, type FakeSlack, type FakeSlackOptions } from './fake-slack';
import { waitFor } from './wait';

export { startFakeSlack, type FakeSlack, type FakeSlackApp } from './fake-slack';

export interface TestSlackConnection {
  connectionId: string;
  teamId: string;
  appId: string;
  signingSecret: string;
  botUserId: string;
}

/**
 * A connection as an operator creates it. Its bot token (unless `botToken: null`) is one a fake
 * Slack must know to take it: pass `slack`, and the fake issues it (a token it never issued gets
 * `invalid_auth`, as from Slack).
 */
export async function createTestSlackConnection(
  db: Db,
  secretKey: SecretKeys | Buffer,
  organizationId: string,
  options: { botToken?: string | null; channels?: string[]; enabled?: boolean; slack?: FakeSlack; enterpriseId?: string } = {},
): Promise<TestSlackConnection> {
  const suffix = randomUUID().replace(/-/g, '').slice(0, 10).toUpperCase();
  const teamId = `T${suffix}`;
  const appId = `A${suffix}`;
  const botUserId = `UB${suffix}`;
  const signingSecret = randomUUID().replace(/-/g, '');
  const botToken = options.botToken === null ? undefined : (options.botToken ?? `xoxb-test-${suffix}`);
  if (botToken !== undefined) options.slack?.issueToken({ token: botToken, teamId, appId });
  const { connectionId } = await createSlackConnection(
    { db, secretKey },
    {
      organizationId,
      teamId,
      apiAppId: appId,
      signingSecret,
      botToken,
      botUserId,
      channels: options.channels,
      enabled: options.enabled,
      enterpriseId: options.enterpriseId,
    },
  );
  return { connectionId, teamId, appId, signingSecret, botUserId };
}

export function slackSignatureHeaders(secret: string, body: string, timestamp = Math.floor(Date.now() / 1000)): Record<string, string> {
  return {
    'x-slack-request-timestamp': String(timestamp),
    'x-slack-signature': signSlackRequest(secret, timestamp, body),
  };
}

export function eventEnvelope<E extends Record<string, unknown>>(
  connection: Pick<TestSlackConnection, 'teamId' | 'appId'>,
  event: E,
  eventId = `Ev${randomUUID().replace(/-/g, '').slice(0, 12).toUpperCase()}`,
) {
  return {
    token: 'deprecated-verification-token',
    team_id: connection.teamId,
    api_app_id: connection.appId,
    event,
    type: 'event_callback',
    event_id: eventId,
    event_time: Math.floor(Date.now() / 1000),
  };
}

/**
 * An event as Slack sends it from a channel shared with another organization (Slack Connect): the
 * envelope's `team_id` is the workspace that owns the channel (`ownerTeamId`), the installing
 * workspace is in `authorizations` (bolt-js issues 935 and 687), and the event names the user's
 * own workspace (`user_team`; `team` too).
 */
export function sharedChannelEnvelope(
  connection: Pick<TestSlackConnection, 'teamId' | 'appId' | 'botUserId'>,
  event: Record<string, unknown>,
  teams: { ownerTeamId: string; userTeamId: string },
) {
  const envelope = eventEnvelope(connection, { ...event, user_team: teams.userTeamId, team: teams.userTeamId });
  return {
    ...envelope,
    team_id: teams.ownerTeamId,
    authorizations: [
      { enterprise_id: null, team_id: connection.teamId, user_id: connection.botUserId, is_bot: true, is_enterprise_install: false },
    ],
    is_ext_shared_channel: true,
    event_context: `4-${randomUUID()}`,
  };
}

export function appMention(user: string, text = 'hello', channel = 'C0TESTCHAN') {
  const ts = `${Math.floor(Date.now() / 1000)}.${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}`;
  return { type: 'app_mention', user, text: `<@UBOT> ${text}`, ts, channel, event_ts: ts };
}

export function directMessage(user: string, text = 'hello', channel = 'D0TESTDM') {
  const ts = `${Math.floor(Date.now() / 1000)}.${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}`;
  return { type: 'message', channel_type: 'im', user, text, ts, channel, event_ts: ts };
}

export const newSlackUserId = () => `U${randomUUID().replace(/-/g, '').slice(0, 10).toUpperCase()}`;

let lastTs = 0;
/** A message ts as Slack makes them: seconds and microseconds of now, each later than the last (a thread is ordered by them). */
export function newTs(): string {
  lastTs = Math.max(lastTs + 1, Date.now() * 1000);
  return `${Math.floor(lastTs / 1_000_000)}.${String(lastTs % 1_000_000).padStart(6, '0')}`;
}

/** The workflow of an invocation: keyed on its message (src/slack/contract.ts slackMessageWorkflowId). */
export function invocationWorkflowId(connectionId: string, event: { channel: string; ts: string }): string {
  return slackMessageWorkflowId(connectionId, event.channel, event.ts);
}

/**
 * A message in a channel as `message.channels` delivers it (https://docs.slack.dev/reference/events/message.channels):
 * `channel_type`, the workspace as `team`, a `client_msg_id`, and its text as a rich_text block too; in a
 * thread, `thread_ts` and `parent_user_id`.
 */
export function channelMessage(
  user: string,
  text: string,
  options: {
    channel?: string;
    thread?: { ts: string; parentUserId: string };
    team?: string;
    channelType?: 'channel' | 'group' | 'mpim';
  } = {},
) {
  const ts = newTs();
  return {
    type: 'message',
    channel: options.channel ?? 'C0TESTCHAN',
    user,
    text,
    ts,
    event_ts: ts,
    channel_type: options.channelType ?? 'channel',
    team: options.team ?? 'T0TEST',
    client_msg_id: randomUUID(),
    blocks: [{ type: 'rich_text', block_id: 'b', elements: [{ type: 'rich_text_section', elements: [{ type: 'text', text }] }] }],
    ...(options.thread ? { thread_ts: options.thread.ts, parent_user_id: options.thread.parentUserId } : {}),
  };
}

/** `app_home_opened` as Slack sends it when a user opens the app's Home or Messages tab (`channel` is their DM with the app). */
export function appHomeOpened(user: string, tab: 'home' | 'messages', channel = 'D0TESTDM') {
  return { type: 'app_home_opened', user, channel, tab, event_ts: newTs() };
}

/** `assistant_thread_started` as Slack sends it to an app with the legacy assistant experience. */
export function assistantThreadStarted(user: string, channel = 'D0TESTDM', threadTs = newTs()) {
  return {
    type: 'assistant_thread_started',
    assistant_thread: { user_id: user, channel_id: channel, thread_ts: threadTs, context: { channel_id: 'C0TESTCHAN', team_id: 'T0TEST' } },
    event_ts: newTs(),
  };
}

/** Posts a signed JSON body to the events route (or its alias). */
export async function postSlackEvent(
  stack: HttpTarget,
  connection: Pick<TestSlackConnection, 'connectionId' | 'signingSecret'>,
  body: unknown,
  options: { provider?: 'slack' | 'chatplatform'; headers?: Record<string, string>; raw?: string } = {},
): Promise<TestResponse> {
  const raw = options.raw ?? JSON.stringify(body);
  return stack.request('POST', `/v1/integrations/${options.provider ?? 'slack'}/${connection.connectionId}/events`, {
    raw,
    headers: { 'content-type': 'application/json', ...slackSignatureHeaders(connection.signingSecret, raw), ...options.headers },
  });
}

/** Posts a signed slash command form to the commands route (or its alias), with a fresh `trigger_id` as Slack sends. */
export async function postSlashCommand(
  stack: TestStack,
  connection: Pick<TestSlackConnection, 'connectionId' | 'signingSecret' | 'teamId' | 'appId'>,
  fields: Record<string, string>,
  options: { provider?: 'slack' | 'chatplatform'; headers?: Record<string, string> } = {},
): Promise<TestResponse> {
  const raw = new URLSearchParams({
    token: 'deprecated',
    team_id: connection.teamId,
    api_app_id: connection.appId,
    channel_id: 'C0TESTCHAN',
    command: '/den',
    text: '',
    // Unique per command, as Slack's are: two commands are never the same bytes, so never a replay.
    trigger_id: `${Date.now()}.${randomUUID()}`,
    ...fields,
  }).toString();
  return stack.request('POST', `/v1/integrations/${options.provider ?? 'slack'}/${connection.connectionId}/commands`, {
    raw,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...slackSignatureHeaders(connection.signingSecret, raw),
      ...options.headers,
    },
  });
}

/** A `block_actions` payload as Slack sends it when a user clicks a button on one of our messages. */
export function blockActions(
  connection: Pick<TestSlackConnection, 'teamId' | 'appId'>,
  options: { user: string; actionId: string; value: string; channel?: string; threadTs?: string; responseUrl?: string },
): Record<string, unknown> {
  const channel = options.channel ?? 'C0TESTCHAN';
  const ts = `${Math.floor(Date.now() / 1000)}.${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}`;
  return {
    type: 'block_actions',
    team: { id: connection.teamId, domain: 'test' },
    user: { id: options.user, username: 'someone', team_id: connection.teamId },
    api_app_id: connection.appId,
    token: 'deprecated',
    container: { type: 'message', message_ts: ts, channel_id: channel, is_ephemeral: false },
    trigger_id: `${Date.now()}.${randomUUID()}`,
    channel: { id: channel, name: 'test' },
    message: { type: 'message', ts, thread_ts: options.threadTs ?? ts, text: 'Working on it…' },
    response_url: options.responseUrl ?? 'https://hooks.slack.com/actions/T0/1/x',
    actions: [
      {
        type: 'button',
        action_id: options.actionId,
        block_id: 'b1',
        value: options.value,
        text: { type: 'plain_text', text: 'Cancel' },
        action_ts: ts,
      },
    ],
  };
}

/** Posts a signed interaction form (`payload=<json>`) to the interactions route (or its alias). */
export async function postInteraction(
  stack: HttpTarget,
  connection: Pick<TestSlackConnection, 'connectionId' | 'signingSecret'>,
  payload: unknown,
  options: { provider?: 'slack' | 'chatplatform'; headers?: Record<string, string>; raw?: string } = {},
): Promise<TestResponse> {
  const raw = options.raw ?? new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
  return stack.request('POST', `/v1/integrations/${options.provider ?? 'slack'}/${connection.connectionId}/interactions`, {
    raw,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...slackSignatureHeaders(connection.signingSecret, raw),
      ...options.headers,
    },
  });
}

/** The token inside the `<url|Connect your account>` link of a slash-command reply or ephemeral text. */
export function linkTokenFrom(text: string): string {
  const match = /<([^|>]+)\|Connect your account>/.exec(text);
  if (!match) throw new Error(`no connect link in: ${text}`);
  const token = new URL(match[1]!).searchParams.get('token');
  if (!token) throw new Error(`no token in: ${match[1]}`);
  return token;
}

/** The service's settings that point it at a fake Slack: its Web API, its OAuth authorize page and its interactions' response URLs. */
export function fakeSlackEnv(slack: FakeSlack): Record<string, string> {
  return { SLACK_API_BASE_URL: slack.url, SLACK_OAUTH_AUTHORIZE_URL: slack.authorizeUrl, SLACK_RESPONSE_URL_PREFIX: slack.responseUrl('') };
}

/** The code of a connect reply's `npx den slack link <code>` command. */
export function linkCodeFrom(text: string): string {
  const match = /`npx den slack link ([0-9A-Z]{5}-[0-9A-Z]{5})`/.exec(text);
  if (!match) throw new Error(`no link code in: ${text}`);
  return match[1]!;
}

/**
 * What the Slack loop tests share: a stack with a worker that calls a fake Slack Web API, an
 * organization, and a Slack connection of it.
 */
export async function startSlackLoop(
  env: Record<string, string> = {},
  fake: FakeSlackOptions = {},
): Promise<{
  stack: TestStack;
  slack: FakeSlack;
  org: Awaited<ReturnType<typeof createTestOrg>>;
  connection: TestSlackConnection;
  stop(): Promise<void>;
}> {
  const slack = await startFakeSlack(fake);
  const stack = await startTestStack({ worker: true, env: { ...fakeSlackEnv(slack), ...env } });
  const org = await createTestOrg(stack.services.database.db);
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  return {
    stack,
    slack,
    org,
    connection,
    stop: async () => {
      await stack.stop();
      await slack.close();
    },
  };
}

/** Links a fresh Slack user to `member` as a member would: a real slash command, then account-links. */
export async function linkSlackUser(
  stack: TestStack,
  connection: TestSlackConnection,
  member: { headers: Record<string, string> },
): Promise<string> {
  const slackUserId = newSlackUserId();
  const command = await postSlashCommand(stack, connection, { user_id: slackUserId });
  const linked = await stack.request('POST', `/v1/integrations/slack/${connection.connectionId}/account-links`, {
    headers: member.headers,
    body: { token: linkTokenFrom(command.json.text) },
  });
  if (linked.status !== 201) throw new Error(`linking ${slackUserId} answered ${linked.status}: ${linked.text}`);
  return slackUserId;
}

/**
 * A member's runtime is there, as the Slack side sees it: one claim poll with their key finds
 * nothing to claim and records the runtime's presence (written off the request's path, so this
 * waits for it). A test that claims runs itself calls this first, as a runtime that is running
 * would have; otherwise the first message says no runtime is online.
 */
export async function markRuntimeOnline(stack: TestStack, member: { memberId: string; headers: Record<string, string> }): Promise<void> {
  const poll = await stack.request('POST', '/v1/automation-runs/claim', { headers: member.headers, body: { waitSeconds: 0 } });
  if (poll.status !== 204 && poll.status !== 200) throw new Error(`claim poll answered ${poll.status}: ${poll.text}`);
  await waitFor(
    () =>
      stack.services.database.db
        .selectFrom('runner_presence')
        .select('runner_id')
        .where('member_id', '=', member.memberId)
        .executeTakeFirst(),
    10_000,
    { what: 'the runtime’s presence' },
  );
}

/** Every form of Slack's `<…>` syntax a runtime could print to notify people or disguise a link. */
/** Mentions Slack's own parsing makes live from plain text (slackRendering); the service must turn that parsing off. */
export const PLAIN_MENTIONS = ['@channel', '@here', '@everyone'] as const;

export const MENTION_FORMS = [
  '<!channel>',
  '<!here>',
  '<!everyone>',
  '<!subteam^S1|@team>',
  '<@U123>',
  '<@U123|name>',
  '<#C1>',
  '<#C1|general>',
  '<https://evil.example|click>',
  '<mailto:x@y|z>',
] as const;

/** A link as the Markdown conversion writes one: an http, https or mailto URL with nothing in it that ends or splits it. */
const SAFE_LINK = /^<(?:https?:\/\/|mailto:)[^<>|\s]*(?:\|[^<>]*)?>/;

/**
 * What in mrkdwn Slack would act on beyond the links the service means: a `<` that opens anything
 * but a safe link (`<!channel>`, `<@U…>`, `<#C…>`, a link cut short), and a `&` that starts no
 * escape. Empty when the text is safe to post.
 */
export function unsafeMrkdwn(text: string): string[] {
  const problems: string[] = [];
  for (const match of text.matchAll(/<[!@#]/g)) problems.push(`live ${text.slice(match.index, match.index + 24)}`);
  for (const match of text.matchAll(/</g)) {
    if (!SAFE_LINK.test(text.slice(match.index))) problems.push(`< opening no link: ${text.slice(match.index, match.index + 40)}`);
  }
  for (const match of text.matchAll(/&(?!amp;|lt;|gt;)/g)) problems.push(`bare &: ${text.slice(match.index, match.index + 12)}`);
  return problems;
}
