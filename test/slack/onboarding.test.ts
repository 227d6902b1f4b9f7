/* eslint-disable @typescript-eslint/no-explicit-any */
/**
 * Onboarding without an operator, over real HTTP on the real stack: an admin with an API key
 * creates a draft, reads its manifest (every URL on APP_BASE_URL), creates the app from it on the
 * fake Slack (whose check of the events Request URL fails until the credentials are set, then
 * passes on *Retry*), sets the credentials, follows the install link through the fake authorize
 * page to the callback, and ends with an active connection whose signed events are accepted. Then
 * the refusals (a state reused, expired, for another organization's connection; a code for
 * another app; an app or workspace other than the connection's), removal (the token revoked at
 * the fake; the next event answered as for an unknown connection) and `app_uninstalled`.
 */
import { FLOW_PAGE_POLICY, issueFlowState } from '../../src/app/install-flow';
import { findSlackConnection } from '../../src/slack/connections';
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { manifestNeeds } from '../../src/slack/manifest';

/** What a connection's app has with follow-ups off: the manifest's scopes and events. */
const APP = manifestNeeds({ threadFollowUps: 'off' });
import { createTestOrg, type TestMember } from '../harness/identity';
import { manifestError } from '../harness/fake-slack-oauth';
import { freePort } from '../harness/ports';
import {
  appMention,
  createTestSlackConnection,
  eventEnvelope,
  fakeSlackEnv,
  newSlackUserId,
  postSlackEvent,
  postSlashCommand,
  linkCodeFrom,
  startFakeSlack,
  type FakeSlack,
  type FakeSlackApp,
} from '../harness/slack';
import { startTestStack, type TestResponse, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let slack: FakeSlack;
let stack: TestStack;
let appBaseUrl: string;
/** Added to the routes' clock: the expired-state test moves it past the state's ten minutes. */
let clockOffsetMs = 0;

beforeAll(async () => {
  slack = await startFakeSlack();
  const port = await freePort();
  appBaseUrl = `http://127.0.0.1:${port}`;
  stack = await startTestStack({
    worker: true,
    port,
    now: () => Date.now() + clockOffsetMs,
    env: { ...fakeSlackEnv(slack), APP_BASE_URL: appBaseUrl, SLACK_LINK_WAIT: '60s' },
  });
});
afterAll(async () => {
  await stack?.stop();
  await slack?.close();
});

const db = () => stack.services.database.db;
const CONNECTIONS = '/v1/integrations/slack/connections';
const CALLBACK = '/v1/integrations/slack/oauth/callback';

function expectPage(res: TestResponse, status: number, reason?: string): void {
  expect({ status: res.status, type: res.headers.get('content-type') }).toEqual({ status, type: 'text/html; charset=utf-8' });
  expect(res.headers.get('content-security-policy')).toBe(FLOW_PAGE_POLICY);
  expect(res.text).not.toMatch(/<script/i);
  if (reason !== undefined) expect(res.text).toContain(`<dd>${reason}</dd>`);
}

async function createDraft(admin: TestMember, name = 'den test'): Promise<{ connectionId: string; manifest: Record<string, any> }> {
  const res = await stack.request('POST', CONNECTIONS, { headers: admin.headers, body: { name } });
  expect(res.status).toBe(201);
  expect(Object.keys(res.json).sort()).toEqual(['connectionId', 'manifest']);
  return res.json;
}

async function setCredentials(admin: TestMember, connectionId: string, app: FakeSlackApp): Promise<TestResponse> {
  return stack.request('PUT', `${CONNECTIONS}/${connectionId}/credentials`, {
    headers: admin.headers,
    body: { clientId: app.clientId, clientSecret: app.clientSecret, signingSecret: app.signingSecret },
  });
}

async function installLink(admin: TestMember, connectionId: string): Promise<string> {
  const res = await stack.request('POST', `${CONNECTIONS}/${connectionId}/install`, { headers: admin.headers });
  expect(res.status).toBe(200);
  return res.json.url as string;
}

/** Opens the install link in a browser signed in to `teamId` on the fake Slack: it redirects to the callback. */
async function authorizeAs(link: string, teamId: string): Promise<URL> {
  const res = await fetch(link, { redirect: 'manual', headers: { cookie: `fake_slack_team=${teamId}` } });
  expect(res.status).toBe(302);
  return new URL(res.headers.get('location')!);
}

const callback = (location: URL) => stack.request('GET', `${location.pathname}${location.search}`);
const exchanges = () => slack.calls.filter((c) => c.method === 'oauth.v2.access').length;

/** Draft, app from its manifest, credentials, Retry, install: an active connection in `teamId`. */
async function onboard(admin: TestMember, teamId: string) {
  const { connectionId, manifest } = await createDraft(admin);
  const app = await slack.createApp(manifest);
  expect((await setCredentials(admin, connectionId, app)).status).toBe(200);
  expect(await slack.retryEventsUrl(app)).toEqual({ status: 200, verified: true });
  const location = await authorizeAs(await installLink(admin, connectionId), teamId);
  expectPage(await callback(location), 200);
  const token = [...slack.tokens].find(([, t]) => t.appId === app.appId && !t.revoked)![0];
  return { connectionId, app, teamId, token, connection: { connectionId, signingSecret: app.signingSecret, teamId, appId: app.appId } };
}

const getConnection = async (admin: TestMember, connectionId: string) =>
  (await stack.request('GET', `${CONNECTIONS}/${connectionId}`, { headers: admin.headers })).json;

describe('an admin connects a workspace through the API alone', () => {
  it('draft → manifest on APP_BASE_URL → app → credentials → Retry → install → active, and its signed events are accepted', async () => {
    const org = await createTestOrg(db());
    const admin = await org.addMember('admin');
    const { connectionId, manifest } = await createDraft(admin);

    // The manifest, as created and as read back: every URL on APP_BASE_URL, what docs/slack.md lists.
    const read = await stack.request('GET', `${CONNECTIONS}/${connectionId}/manifest`, { headers: admin.headers });
    expect(read.json.manifest).toEqual(manifest);
    const base = `${appBaseUrl}/v1/integrations/slack/${connectionId}`;
    expect(manifest.settings.event_subscriptions).toEqual({ request_url: `${base}/events`, bot_events: [...APP.events] });
    expect(manifest.features.slash_commands).toEqual([expect.objectContaining({ command: '/den', url: `${base}/commands` })]);
    expect(manifest.settings.interactivity).toEqual({ is_enabled: true, request_url: `${base}/interactions` });
    expect(manifest.oauth_config).toEqual({ redirect_urls: [`${appBaseUrl}${CALLBACK}`], scopes: { bot: [...APP.scopes] } });
    const urls = JSON.stringify(manifest).match(/https?:\/\/[^"]+/g)!;
    expect(urls.length).toBe(4);
    expect(urls.filter((url) => !url.startsWith(`${appBaseUrl}/v1/integrations/slack/`))).toEqual([]);
    expect(await getConnection(admin, connectionId)).toMatchObject({ state: 'draft', hasCredentials: false, teamId: null });

    // Slack checks the events Request URL when the app is created: the draft has no signing secret, so it fails.
    const app = await slack.createApp(manifest);
    expect(app.eventsUrlVerified).toBe(false);
    expect(await slack.retryEventsUrl(app)).toEqual({ status: 401, verified: false });

    const credentials = await setCredentials(admin, connectionId, app);
    expect(credentials.status).toBe(200);
    expect(credentials.json).toMatchObject({ state: 'draft', hasCredentials: true, clientId: app.clientId });
    expect(credentials.text).not.toContain(app.clientSecret);
    expect(credentials.text).not.toContain(app.signingSecret);
    // Retry: now the signed challenge is answered.
    expect(await slack.retryEventsUrl(app)).toEqual({ status: 200, verified: true });

    const link = await installLink(admin, connectionId);
    const authorize = new URL(link);
    expect(`${authorize.origin}${authorize.pathname}`).toBe(slack.authorizeUrl);
    expect(Object.fromEntries(authorize.searchParams)).toEqual({
      client_id: app.clientId,
      scope: APP.scopes.join(','),
      redirect_uri: `${appBaseUrl}${CALLBACK}`,
      state: expect.any(String),
    });
    const teamId = slack.addWorkspace('Acme HQ');
    const location = await authorizeAs(link, teamId);
    expect(`${location.origin}${location.pathname}`).toBe(`${appBaseUrl}${CALLBACK}`);
    const page = await callback(location);
    expectPage(page, 200);
    expect(page.text).toContain('Connected to workspace Acme HQ; you can close this tab.');

    const token = [...slack.tokens].find(([, t]) => t.appId === app.appId)![0];
    expect(await getConnection(admin, connectionId)).toMatchObject({
      state: 'active',
      teamId,
      teamName: 'Acme HQ',
      appId: app.appId,
      hasBotToken: true,
      botUserId: expect.stringMatching(/^U/),
      installedAt: expect.any(String),
    });
    const listed = await stack.request('GET', CONNECTIONS, { headers: admin.headers });
    expect(listed.json.connections.map((c: { connectionId: string; state: string }) => [c.connectionId, c.state])).toEqual([
      [connectionId, 'active'],
    ]);

    // A signed mention is accepted and routed: its unlinked user is prompted with the installed bot token.
    const connection = { connectionId, signingSecret: app.signingSecret, teamId, appId: app.appId };
    const user = newSlackUserId();
    const accepted = await postSlackEvent(stack, connection, eventEnvelope(connection, appMention(user, 'hello')));
    expect({ status: accepted.status, body: accepted.json }).toEqual({ status: 200, body: { ok: true } });
    const prompt = await slack.waitForCall('chat.postEphemeral', (c) => c.body.user === user);
    expect(prompt.authorization).toBe(`Bearer ${token}`);

    // No secret and no token in the service's logs.
    const logs = JSON.stringify(stack.logs);
    for (const secret of [app.clientSecret, app.signingSecret, token]) expect(logs).not.toContain(secret);
  });

  it('follow-ups turned on: the app lacks their events (manifestOutdated, with the manifest to apply) until it is applied and installed again', async () => {
    const org = await createTestOrg(db());
    const { connectionId, teamId, app } = await onboard(org.owner, slack.addWorkspace());
    const installed = await getConnection(org.owner, connectionId);
    expect(installed).toMatchObject({ threadFollowUps: 'off', manifestOutdated: false, appLacks: { scopes: [], events: [] } });
    expect(installed.manifest).toBeUndefined();

    const url = `${CONNECTIONS}/${connectionId}`;
    const patched = await stack.request('PATCH', url, { headers: org.owner.headers, body: { threadFollowUps: 'asker' } });
    const followUpEvents = ['message.channels', 'message.groups', 'message.mpim'];
    expect(patched.json).toMatchObject({
      threadFollowUps: 'asker',
      manifestOutdated: true,
      appLacks: { scopes: [], events: followUpEvents },
    });
    expect(patched.json.manifest.settings.event_subscriptions.bot_events).toEqual(expect.arrayContaining(followUpEvents));
    expect((await stack.request('GET', `${url}/manifest`, { headers: org.owner.headers })).json.manifest).toEqual(patched.json.manifest);
    // The list says the same, without the manifest.
    const listed = (await stack.request('GET', CONNECTIONS, { headers: org.owner.headers })).json.connections[0];
    expect(listed).toMatchObject({ connectionId, manifestOutdated: true });
    expect(listed.manifest).toBeUndefined();

    // Applied on the app's App Manifest page (Slack takes it), then installed again.
    expect(manifestError(patched.json.manifest)).toBeUndefined();
    app.manifest = patched.json.manifest;
    expectPage(await callback(await authorizeAs(await installLink(org.owner, connectionId), teamId)), 200);
    expect(await getConnection(org.owner, connectionId)).toMatchObject({ manifestOutdated: false, appLacks: { scopes: [], events: [] } });

    // An operator's connection, whose app the service never saw: taken to have what apps had before.
    const operators = await createTestSlackConnection(db(), stack.services.secretKey, org.organizationId);
    expect(await getConnection(org.owner, operators.connectionId)).toMatchObject({
      manifestOutdated: true,
      appLacks: {
        scopes: ['assistant:write'],
        events: ['assistant_thread_started', 'assistant_thread_context_changed', 'app_home_opened'],
      },
    });
  });

  it('a reinstall replaces the bot token', async () => {
    const org = await createTestOrg(db());
    const { connectionId, teamId, token } = await onboard(org.owner, slack.addWorkspace());
    const again = await callback(await authorizeAs(await installLink(org.owner, connectionId), teamId));
    expectPage(again, 200);
    expect(again.text).toContain('Its bot token was replaced.');
    const stored = await findSlackConnection(db(), stack.services.secretKey, connectionId);
    expect(stored?.botToken).toEqual(expect.stringMatching(/^xoxb-/));
    expect(stored?.botToken).not.toBe(token);
    expect(slack.tokens.get(stored!.botToken!)).toMatchObject({ teamId, revoked: false });
  });

  it('new credentials count at once: a request signed with the old signing secret is refused, the new one verifies', async () => {
    const org = await createTestOrg(db());
    const { connectionId, app, connection } = await onboard(org.owner, slack.addWorkspace());
    const challenge = (secret: string) => {
      const raw = JSON.stringify({ type: 'url_verification', challenge: 'rotated' });
      return postSlackEvent(stack, { connectionId, signingSecret: secret }, undefined, { raw });
    };
    expect((await challenge(connection.signingSecret)).status).toBe(200);
    const rotated = { ...app, signingSecret: 'f'.repeat(32) };
    expect((await setCredentials(org.owner, connectionId, rotated)).status).toBe(200);
    expect((await challenge(app.signingSecret)).status).toBe(401);
    expect((await challenge(rotated.signingSecret)).json).toEqual({ challenge: 'rotated' });
  });

  it('is for admins: 401 without a key, 403 for a member, 404 for another organization’s connection', async () => {
    const [org, other] = [await createTestOrg(db()), await createTestOrg(db())];
    const member = await org.addMember('member');
    expect((await stack.request('POST', CONNECTIONS, { body: {} })).status).toBe(401);
    const forbidden = await stack.request('POST', CONNECTIONS, { headers: member.headers, body: {} });
    expect(forbidden).toMatchObject({ status: 403, json: { error: 'forbidden', reason: 'admin_required' } });
    const { connectionId } = await createDraft(other.owner);
    for (const [method, path] of [
      ['GET', `${CONNECTIONS}/${connectionId}`],
      ['GET', `${CONNECTIONS}/${connectionId}/manifest`],
      ['POST', `${CONNECTIONS}/${connectionId}/install`],
      ['DELETE', `${CONNECTIONS}/${connectionId}`],
    ] as const) {
      const res = await stack.request(method, path, { headers: org.owner.headers });
      expect({ path, status: res.status, body: res.json }).toEqual({
        path,
        status: 404,
        body: { error: 'not_found', message: 'No such Slack connection.' },
      });
    }
    const patch = await stack.request('PATCH', `${CONNECTIONS}/${connectionId}`, { headers: org.owner.headers, body: { enabled: false } });
    expect(patch.status).toBe(404);
    expect(await getConnection(other.owner, connectionId)).toMatchObject({ enabled: true });
    // Install before the credentials: a clear 409.
    const early = await stack.request('POST', `${CONNECTIONS}/${connectionId}/install`, { headers: other.owner.headers });
    expect(early).toMatchObject({ status: 409, json: { error: 'credentials_missing' } });
  });

  it('PATCH sets routing and the channel allowlist', async () => {
    const org = await createTestOrg(db());
    const { connectionId } = await createDraft(org.owner);
    const res = await stack.request('PATCH', `${CONNECTIONS}/${connectionId}`, {
      headers: org.owner.headers,
      body: { enabled: false, channels: ['C01', 'C02'] },
    });
    expect(res.json).toMatchObject({ enabled: false, channels: ['C01', 'C02'], disabledReason: 'operator' });
    const cleared = await stack.request('PATCH', `${CONNECTIONS}/${connectionId}`, { headers: org.owner.headers, body: { channels: [] } });
    expect(cleared.json).toMatchObject({ enabled: false, channels: null });
    const nothing = await stack.request('PATCH', `${CONNECTIONS}/${connectionId}`, { headers: org.owner.headers, body: {} });
    expect(nothing.json).toMatchObject({ enabled: false, channels: null });
    const unknown = await stack.request('PATCH', `${CONNECTIONS}/${connectionId}`, { headers: org.owner.headers, body: { name: 'x' } });
    expect(unknown.status).toBe(400);
  });
});

describe('the callback refuses, with a clear page, and stores nothing', () => {
  /** A draft with its app's credentials set, ready to install. */
  async function readyDraft(admin: TestMember) {
    const { connectionId, manifest } = await createDraft(admin);
    const app = await slack.createApp(manifest);
    expect((await setCredentials(admin, connectionId, app)).status).toBe(200);
    return { connectionId, app };
  }

  async function refusedWith(location: URL, status: number, reason: string, connectionId: string, admin: TestMember) {
    const before = exchanges();
    const res = await callback(location);
    expectPage(res, status, reason);
    if (reason.startsWith('state_') || reason === 'other_organization') expect(exchanges()).toBe(before);
    expect(await getConnection(admin, connectionId)).toMatchObject({ state: 'draft', hasBotToken: false });
    return res;
  }

  it('a state reused, expired, for another flow, or bound to another organization’s connection', async () => {
    const [org, other] = [await createTestOrg(db()), await createTestOrg(db())];
    const teamId = slack.addWorkspace();
    const { connectionId } = await onboard(org.owner, teamId);
    const used = await authorizeAs(await installLink(org.owner, connectionId), teamId);
    expectPage(await callback(used), 200);
    const draft = await readyDraft(org.owner);

    // Reused: the state of a completed install, with a fresh code.
    const reused = await authorizeAs(await installLink(org.owner, draft.connectionId), teamId);
    reused.searchParams.set('state', used.searchParams.get('state')!);
    await refusedWith(reused, 403, 'state_reused', draft.connectionId, org.owner);

    // Expired: ten minutes after the link was made.
    const late = await authorizeAs(await installLink(org.owner, draft.connectionId), teamId);
    clockOffsetMs = 10 * 60_000 + 1_000;
    try {
      await refusedWith(late, 403, 'state_expired', draft.connectionId, org.owner);
    } finally {
      clockOffsetMs = 0;
    }

    // Bound to another organization's connection: signed by this service, but for org with other's subject.
    const theirs = await readyDraft(other.owner);
    const flowDeps = { db: db(), secretKey: stack.services.secretKey, now: Date.now };
    const foreign = await issueFlowState(flowDeps, {
      purpose: 'slack_install',
      organizationId: org.organizationId,
      memberId: org.owner.memberId,
      subject: theirs.connectionId,
      ttlMs: 60_000,
    });
    const code = slack.issueCode({
      clientId: theirs.app.clientId,
      redirectUri: `${appBaseUrl}${CALLBACK}`,
      teamId,
      scopes: [...APP.scopes],
    });
    const crossed = new URL(`${appBaseUrl}${CALLBACK}?${new URLSearchParams({ code, state: foreign.state })}`);
    const page = await refusedWith(crossed, 403, 'other_organization', theirs.connectionId, other.owner);
    expect(page.text).not.toContain(theirs.connectionId);

    // Another flow's state (GitHub's install).
    const github = await issueFlowState(flowDeps, {
      purpose: 'github_install',
      organizationId: org.organizationId,
      memberId: org.owner.memberId,
      ttlMs: 60_000,
    });
    const wrong = await authorizeAs(await installLink(org.owner, draft.connectionId), teamId);
    wrong.searchParams.set('state', github.state);
    await refusedWith(wrong, 403, 'state_wrong_purpose', draft.connectionId, org.owner);
  });

  it('a code Slack issued for another app: Slack refuses it for this app’s credentials', async () => {
    const org = await createTestOrg(db());
    const teamId = slack.addWorkspace();
    const [mine, another] = [await readyDraft(org.owner), await readyDraft(org.owner)];
    const location = await authorizeAs(await installLink(org.owner, mine.connectionId), teamId);
    location.searchParams.set(
      'code',
      slack.issueCode({ clientId: another.app.clientId, redirectUri: `${appBaseUrl}${CALLBACK}`, teamId, scopes: [...APP.scopes] }),
    );
    const res = await refusedWith(location, 400, 'authorization_refused', mine.connectionId, org.owner);
    expect(res.text).toContain('invalid_code');
    expect(slack.calls.filter((c) => c.method === 'oauth.v2.access').at(-1)?.error).toBe('invalid_code');
  });

  it('an app or a workspace other than the one the connection is bound to: refused, and the token Slack issued revoked', async () => {
    const org = await createTestOrg(db());
    // A connection an operator bound to its app; credentials of another app set on it.
    const bound = await createTestSlackConnection(db(), stack.services.secretKey, org.organizationId);
    const { manifest } = await createDraft(org.owner);
    const stranger = await slack.createApp(manifest);
    expect((await setCredentials(org.owner, bound.connectionId, stranger)).status).toBe(200);
    const mismatch = await callback(
      await authorizeAs(await installLink(org.owner, bound.connectionId), slack.addWorkspace(undefined, bound.teamId)),
    );
    expectPage(mismatch, 409, 'app_mismatch');
    const issued = [...slack.tokens.values()].filter((t) => t.appId === stranger.appId);
    expect(issued).toEqual([expect.objectContaining({ revoked: true })]);
    expect((await findSlackConnection(db(), stack.services.secretKey, bound.connectionId))?.apiAppId).toBe(bound.appId);

    // An active connection installed again into another workspace.
    const home = slack.addWorkspace();
    const { connectionId } = await onboard(org.owner, home);
    const elsewhere = await callback(await authorizeAs(await installLink(org.owner, connectionId), slack.addWorkspace()));
    expectPage(elsewhere, 409, 'team_mismatch');
    expect(await getConnection(org.owner, connectionId)).toMatchObject({ state: 'active', teamId: home });
  });

  it('the admin cancelled on Slack’s page; markup in the query is never echoed', async () => {
    const org = await createTestOrg(db());
    const draft = await readyDraft(org.owner);
    const res = await fetch(await installLink(org.owner, draft.connectionId), {
      redirect: 'manual',
      headers: { cookie: `fake_slack_team=${slack.addWorkspace()}; fake_slack_deny=1` },
    });
    const denied = await callback(new URL(res.headers.get('location')!));
    expectPage(denied, 400, 'slack_error');
    expect(denied.text).toContain('access_denied');
    const hostile = '<script>alert(1)</script>';
    for (const query of [
      '',
      `?error=${encodeURIComponent(hostile)}`,
      `?code=${encodeURIComponent(hostile)}&state=x`,
      '?code=a&code=b&state=c',
    ]) {
      // None carries a state of this flow: refused before anything else is read.
      const page = await stack.request('GET', `${CALLBACK}${query}`);
      expectPage(page, 403, query === '' ? 'invalid_callback' : undefined);
      expect(page.text).not.toContain('alert(');
    }
  });
});

/** An unlinked user's mention, left waiting for a link; its workflow handle. */
async function waitingMention(connection: { connectionId: string; signingSecret: string; teamId: string; appId: string }) {
  const envelope = eventEnvelope(connection, appMention(newSlackUserId(), 'are you there'));
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  await waitFor(async () => (await handle.query(slackEventStateQuery)).status === 'awaiting_link', 15_000, { what: 'awaiting_link' });
  return handle;
}

/** A member linked to a fresh Slack user of the connection, through the `/den` reply's code. */
async function linkedMember(org: Awaited<ReturnType<typeof createTestOrg>>, connection: Parameters<typeof postSlashCommand>[1]) {
  const member = await org.addMember('member');
  const reply = await postSlashCommand(stack, connection, { user_id: newSlackUserId() });
  const linked = await stack.request('POST', '/v1/integrations/slack/account-links', {
    headers: member.headers,
    body: { code: linkCodeFrom(reply.json.text) },
  });
  expect(linked.status).toBe(201);
  return member;
}

const linkCount = async (connectionId: string) =>
  (await db().selectFrom('slack_account_links').select('slack_user_id').where('connection_id', '=', connectionId).execute()).length;

describe('removal', () => {
  it('DELETE revokes the token at Slack, removes links and waiting invocations; the next event is answered as for an unknown connection', async () => {
    const org = await createTestOrg(db());
    const { connectionId, token, connection } = await onboard(org.owner, slack.addWorkspace());
    await linkedMember(org, connection);
    const waiting = await waitingMention(connection);

    slack.script('auth.revoke', { status: 500, body: { ok: false, error: 'internal_error' } });
    const failed = await stack.request('DELETE', `${CONNECTIONS}/${connectionId}`, { headers: org.owner.headers });
    expect(failed).toMatchObject({ status: 502, json: { error: 'slack_unavailable' } });
    expect(await getConnection(org.owner, connectionId)).toMatchObject({ state: 'active' });

    const res = await stack.request('DELETE', `${CONNECTIONS}/${connectionId}`, { headers: org.owner.headers });
    expect(res.status).toBe(204);
    const revoke = slack.calls.filter((c) => c.method === 'auth.revoke').at(-1)!;
    expect({ authorization: revoke.authorization, status: revoke.status, error: revoke.error }).toEqual({
      authorization: `Bearer ${token}`,
      status: 200,
      error: undefined,
    });
    expect(slack.tokens.get(token)?.revoked).toBe(true);
    expect(await linkCount(connectionId)).toBe(0);
    expect(await waiting.result()).toMatchObject({ status: 'connection_removed', detail: 'connection_deleted' });

    // Its next event, signed with its secret, gets exactly what an id that never existed gets.
    const event = eventEnvelope(connection, appMention(newSlackUserId(), 'still there?'));
    const gone = await postSlackEvent(stack, connection, event);
    const never = await postSlackEvent(stack, { ...connection, connectionId: 'emc_01h2xcejqtf2nbrexx3vqjhp41' }, event);
    expect({ status: gone.status, body: gone.json }).toEqual({ status: 401, body: { ok: false } });
    expect({ status: never.status, body: never.json }).toEqual({ status: gone.status, body: gone.json });
    expect((await stack.request('GET', `${CONNECTIONS}/${connectionId}`, { headers: org.owner.headers })).status).toBe(404);
  });

  it('app_uninstalled marks it uninstalled, removes its member links, and ends its waiting invocations with the reason', async () => {
    const org = await createTestOrg(db());
    const { connectionId, app, teamId, connection } = await onboard(org.owner, slack.addWorkspace());
    await linkedMember(org, connection);
    expect(await linkCount(connectionId)).toBe(1);
    const waiting = await waitingMention(connection);

    const sent = await slack.uninstall(app, teamId);
    expect(sent.status).toBe(200);
    const lifecycle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connectionId, sent.eventId));
    expect(await lifecycle.result()).toMatchObject({ status: 'connection_disabled', detail: 'app_uninstalled' });
    expect(await waiting.result()).toMatchObject({ status: 'connection_removed', detail: 'app_uninstalled' });
    expect(await linkCount(connectionId)).toBe(0);
    expect(await getConnection(org.owner, connectionId)).toMatchObject({
      state: 'uninstalled',
      enabled: false,
      hasBotToken: false,
      uninstalledAt: expect.any(String),
    });
    const enable = await stack.request('PATCH', `${CONNECTIONS}/${connectionId}`, { headers: org.owner.headers, body: { enabled: true } });
    expect(enable).toMatchObject({ status: 409, json: { error: 'uninstalled' } });

    // Installed again, it is active once more.
    expectPage(await callback(await authorizeAs(await installLink(org.owner, connectionId), teamId)), 200);
    expect(await getConnection(org.owner, connectionId)).toMatchObject({ state: 'active', enabled: true, uninstalledAt: null });
  });
});
