/**
 * An app with token rotation on (https://docs.slack.dev/authentication/using-token-rotation), over
 * the real stack: installed through the API (draft, app from its manifest with rotation switched
 * on, `PUT …/credentials`, Slack's OAuth install), its bot token expiring after 60 s on the fake
 * Slack instead of Slack's 12 hours. The connection keeps answering past each expiry, with one
 * refresh (`oauth.v2.access`, `grant_type=refresh_token`) per expiry, however many calls want the
 * token at once; `token_expired` is refreshed and tried once more, never taken for a refusal of
 * streaming, and a mark it left once is cleared. A bot token Slack never issued (`invalid_auth`)
 * is no reason to refresh: the reply fails, saying so.
 */
import { createSlackConnection } from '../../src/slack/connections';
import { freshBotToken } from '../../src/slack/tokens';
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { createTestOrg, type TestMember } from '../harness/identity';
import { freePort } from '../harness/ports';
import { runsClient } from '../harness/runs';
import {
  appMention,
  eventEnvelope,
  fakeSlackEnv,
  linkSlackUser,
  postSlackEvent,
  startFakeSlack,
  type FakeSlack,
  type FakeSlackApp,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const TOKEN_LIFETIME_MS = 60_000;

let slack: FakeSlack;
let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
let app: FakeSlackApp;
let admin: TestMember;
let member: TestMember;
let slackUserId: string;
let connection: { connectionId: string; signingSecret: string; teamId: string; appId: string; botUserId: string };

const CONNECTIONS = '/v1/integrations/slack/connections';
const db = () => stack.services.database.db;
const refreshes = () => slack.calls.filter((c) => c.method === 'oauth.v2.access' && c.body.grant_type === 'refresh_token' && !c.error);
const view = async () => (await stack.request('GET', `${CONNECTIONS}/${connection.connectionId}`, { headers: admin.headers })).json;

beforeAll(async () => {
  slack = await startFakeSlack({ tokenLifetimeMs: TOKEN_LIFETIME_MS });
  const port = await freePort();
  stack = await startTestStack({ worker: true, port, env: { ...fakeSlackEnv(slack), APP_BASE_URL: `http://127.0.0.1:${port}` } });
  org = await createTestOrg(db());
  admin = await org.addMember('admin');
  member = await org.addMember('member');
  const draft = await stack.request('POST', CONNECTIONS, { headers: admin.headers, body: { name: 'rotating' } });
  const { connectionId, manifest } = draft.json;
  // The generated manifest turns rotation off; this app's owner switched it on in Slack.
  app = await slack.createApp({ ...manifest, settings: { ...manifest.settings, token_rotation_enabled: true } });
  const credentials = await stack.request('PUT', `${CONNECTIONS}/${connectionId}/credentials`, {
    headers: admin.headers,
    body: { clientId: app.clientId, clientSecret: app.clientSecret, signingSecret: app.signingSecret },
  });
  expect(credentials.status).toBe(200);
  const teamId = slack.addWorkspace('rotating');
  const link = (await stack.request('POST', `${CONNECTIONS}/${connectionId}/install`, { headers: admin.headers })).json.url;
  const authorized = await fetch(link, { redirect: 'manual', headers: { cookie: `fake_slack_team=${teamId}` } });
  const location = new URL(authorized.headers.get('location')!);
  expect((await stack.request('GET', `${location.pathname}${location.search}`)).status).toBe(200);
  const bound = (await stack.request('GET', `${CONNECTIONS}/${connectionId}`, { headers: admin.headers })).json;
  connection = { connectionId, signingSecret: app.signingSecret, teamId, appId: app.appId, botUserId: bound.botUserId };
  slackUserId = await linkSlackUser(stack, { ...connection }, member);
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await slack?.close();
});

/**
 * A mention answered by the member's runtime (this test): the invocation's end state. Through
 * `via` (by default the rotating connection, its user `slackUserId`); `streamed: false` when the
 * answer cannot stream, so nothing waits for it to.
 */
async function mentionAnswered(text: string, via = { connection, user: slackUserId, streamed: true }) {
  const mention = appMention(via.user, text);
  const envelope = eventEnvelope(via.connection, mention);
  expect((await postSlackEvent(stack, via.connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(via.connection.connectionId, envelope.event_id));
  const runId = await waitFor(async () => (await handle.query(slackEventStateQuery)).runId ?? undefined, 20_000, { what: 'the run' });
  const runs = runsClient(stack, member.headers);
  await runs.waitForStatus(runId, ['queued'], 20_000);
  expect((await runs.claim(runId)).status).toBe(200);
  const event = (sequence: number, type: string, payload: Record<string, unknown>) => ({
    attempt: 1,
    sequence,
    type,
    payload,
    createdAt: Date.now(),
  });
  expect((await runs.postEvent(runId, event(1, 'assistant', { text: `answer to ${text}` }))).status).toBe(200);
  if (via.streamed) {
    await slack.waitForCall('chat.appendStream', (c) => String(c.body.markdown_text ?? '').includes(`answer to ${text}`), 20_000);
  }
  expect((await runs.postEvent(runId, event(2, 'terminal', { status: 'succeeded' }))).status).toBe(200);
  return { state: await handle.result(), mention };
}

it('is installed with rotation on: the refresh token and expiry kept (sealed), the connection shows it', async () => {
  const row = await db().selectFrom('slack_connections').selectAll().where('id', '=', connection.connectionId).executeTakeFirstOrThrow();
  expect(row.refresh_token).not.toBeNull();
  expect(row.refresh_token).not.toMatch(/^xoxe-/);
  const issued = [...slack.calls].reverse().find((c) => c.method === 'oauth.v2.access' && !c.error)!;
  expect(issued.body.grant_type).toBeUndefined();
  expect(row.token_expires_at!.getTime() - row.token_issued_at!.getTime()).toBe(TOKEN_LIFETIME_MS);
  expect(await view()).toMatchObject({ tokenRotation: true, tokenExpiresAt: row.token_expires_at!.toISOString(), hasBotToken: true });
});

it('keeps answering past each expiry, with one refresh per expiry, however many calls want the token at once', async () => {
  const before = refreshes().length;
  expect((await mentionAnswered('first')).state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  const { tokenExpiresAt } = await view();
  await waitFor(() => Date.now() > new Date(tokenExpiresAt).getTime() + 1_000, TOKEN_LIFETIME_MS + 5_000, {
    what: 'the token to expire',
    intervalMs: 500,
  });
  // Three invocations at once, each of them posting, streaming and editing with the token.
  const answers = await Promise.all(['second', 'third', 'fourth'].map((text) => mentionAnswered(text)));
  for (const { state } of answers) expect(state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  expect(refreshes().length - before).toBe(1);
  expect(slack.calls.filter((c) => c.error === 'token_expired' || c.error === 'invalid_auth')).toEqual([]);
  // Every Slack call after the refresh used the token it issued.
  const fresh = (await view()).tokenExpiresAt;
  expect(new Date(fresh).getTime()).toBeGreaterThan(new Date(tokenExpiresAt).getTime());
}, 180_000);

it('token_expired all the same: refreshed and tried once more, never remembered as a refusal of streaming', async () => {
  const before = refreshes().length;
  slack.script('chat.startStream', { status: 200, body: { ok: false, error: 'token_expired' } });
  const { state, mention } = await mentionAnswered('expired at Slack');
  expect(state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  expect(refreshes().length - before).toBe(1);
  const starts = slack.calls.filter((c) => c.method === 'chat.startStream' && c.body.thread_ts === mention.ts);
  expect(starts.map((c) => c.error ?? 'ok')).toEqual(['token_expired', 'ok']);
  expect(starts[0]!.authorization).not.toBe(starts[1]!.authorization);
  const row = await db()
    .selectFrom('slack_connections')
    .select('streaming_refused')
    .where('id', '=', connection.connectionId)
    .executeTakeFirstOrThrow();
  expect(row.streaming_refused).toBeNull();
}, 60_000);

it('clears a refusal of streaming an expired token once left, at its refresh', async () => {
  await db()
    .updateTable('slack_connections')
    .set({ streaming_refused: 'token_expired', streaming_refused_at: new Date() })
    .where('id', '=', connection.connectionId)
    .execute();
  slack.script('chat.postMessage', { status: 200, body: { ok: false, error: 'token_expired' } });
  const { state, mention } = await mentionAnswered('mark cleared');
  expect(state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  // The answer streamed: the mark was gone before the stream started.
  expect(slack.messages.some((m) => m.thread_ts === mention.ts && m.stream)).toBe(true);
  const row = await db()
    .selectFrom('slack_connections')
    .select('streaming_refused')
    .where('id', '=', connection.connectionId)
    .executeTakeFirstOrThrow();
  expect(row.streaming_refused).toBeNull();
}, 60_000);

it('refreshes once per connection across processes: concurrent callers on separate sessions share one refresh', async () => {
  const before = refreshes().length;
  const deps = { db: db(), secretKey: stack.services.secretKey, apiBaseUrl: slack.url };
  const stored = await freshBotToken(deps, connection.connectionId);
  expect(stored).toMatchObject({ ok: true, refreshed: false });
  // Slack says this token expired: eight callers at once (each on a Postgres session of its own), one refresh.
  const results = await Promise.all(
    Array.from({ length: 8 }, () => freshBotToken(deps, connection.connectionId, (stored as { token: string }).token)),
  );
  expect(results.filter((r) => r.ok && r.refreshed)).toHaveLength(1);
  expect(new Set(results.map((r) => (r as { token: string }).token)).size).toBe(1);
  expect(refreshes().length - before).toBe(1);
});

it('a bot token Slack never issued: every call answered invalid_auth, the reply fails saying so, and no refresh is tried', async () => {
  // A rotating connection in another workspace, pasted with a bot token and a refresh token Slack never issued.
  const botToken = 'xoxb-never-issued-by-slack';
  const refreshToken = 'xoxe-1-never-issued-by-slack';
  const unissued = {
    teamId: slack.addWorkspace('unissued'),
    appId: app.appId,
    signingSecret: app.signingSecret,
    botUserId: 'UBUNISSUED1',
  };
  const { connectionId } = await createSlackConnection(
    { db: db(), secretKey: stack.services.secretKey },
    {
      organizationId: org.organizationId,
      ...unissued,
      apiAppId: unissued.appId,
      botToken,
      rotation: { refreshToken, expiresInMs: 12 * 3_600_000 },
      clientId: app.clientId,
      clientSecret: app.clientSecret,
    },
  );
  const via = { ...unissued, connectionId };
  const user = await linkSlackUser(stack, via, member);
  const since = slack.calls.length;
  const { state } = await mentionAnswered('never issued', { connection: via, user, streamed: false });
  expect(state).toMatchObject({ status: 'reply_failed', detail: 'invalid_auth', runStatus: 'succeeded' });
  const withToken = slack.calls.slice(since).filter((c) => c.authorization === `Bearer ${botToken}`);
  expect(withToken.length).toBeGreaterThan(0);
  expect(withToken.filter((c) => c.error !== 'invalid_auth')).toEqual([]);
  // invalid_auth is not an expiry: the refresh token was never spent.
  expect(slack.calls.filter((c) => c.method === 'oauth.v2.access' && c.body.refresh_token === refreshToken)).toEqual([]);
  const row = await db()
    .selectFrom('slack_connections')
    .select('streaming_refused')
    .where('id', '=', connectionId)
    .executeTakeFirstOrThrow();
  expect(row.streaming_refused).toBeNull();
}, 60_000);
