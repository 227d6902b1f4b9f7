/**
 * Channels shared with another organization (Slack Connect) and Slack's notice that it drops the
 * app's events, over the real stack. A shared channel's event names the workspace that owns the
 * channel as `team_id` and the installation in `authorizations` (bolt-js issues 935 and 687): it
 * is the connection's, its member comes from the link (a partner workspace's user linked like any
 * other), and the answer streams to the user in their own workspace. An Enterprise Grid org-wide
 * install is named in `authorizations` by its organization (`enterprise_id`, `is_enterprise_install`),
 * whichever of its workspaces the event comes from. `app_rate_limited` carries no
 * `authorizations`: it is the connection's by its top-level `team_id`, recorded on the connection
 * and counted.
 */
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import type { TestMember } from '../harness/identity';
import { runsClient } from '../harness/runs';
import {
  appMention,
  createTestSlackConnection,
  eventEnvelope,
  linkCodeFrom,
  linkSlackUser,
  newSlackUserId,
  postSlackEvent,
  sharedChannelEnvelope,
  startSlackLoop,
  type FakeSlack,
  type TestSlackConnection,
} from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
let slack: FakeSlack;
let connection: TestSlackConnection;

beforeAll(async () => {
  loop = await startSlackLoop();
  ({ stack, slack, connection } = loop);
});
afterAll(() => loop.stop());

const PARTNER = 'TPARTNER0001';
const OWNER = 'TOWNER00001';

const handleOf = (eventId: string) =>
  stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, eventId));

/** The member's runtime: claims the invocation's run and answers with an assistant text, then a terminal. */
async function answerRun(member: TestMember, runId: string, text: string) {
  const call = (path: string, body: unknown) =>
    stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/${path}`, { headers: member.headers, body });
  await runsClient(stack, member.headers).waitForStatus(runId, ['queued'], 20_000);
  expect((await call('claim', {})).status).toBe(200);
  expect((await call('events', { attempt: 1, sequence: 1, createdAt: Date.now(), type: 'assistant', payload: { text } })).status).toBe(200);
  // Long enough for the progress to stream before the end.
  await slack.waitForCall('chat.appendStream', (c) => String(c.body.markdown_text ?? '').includes(text), 20_000);
  expect(
    (await call('events', { attempt: 1, sequence: 2, createdAt: Date.now(), type: 'terminal', payload: { status: 'succeeded' } })).status,
  ).toBe(200);
}

async function runOf(eventId: string) {
  return waitFor(
    async () => {
      const state = await handleOf(eventId).query(slackEventStateQuery);
      return state.status === 'run_created' ? state.runId! : undefined;
    },
    20_000,
    { what: 'the run of the mention' },
  );
}

describe('a Slack Connect mention (foreign envelope team_id, the connection in authorizations)', () => {
  it('from a linked partner-workspace member: routed and answered, streamed to the member in their own workspace', async () => {
    const member = await loop.org.addMember('member');
    const user = await linkSlackUser(stack, connection, member);
    const mention = appMention(user, 'hello from the other side', 'C0SHARED01');
    const envelope = sharedChannelEnvelope(connection, mention, { ownerTeamId: OWNER, userTeamId: PARTNER });
    const res = await postSlackEvent(stack, connection, envelope);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
    await answerRun(member, await runOf(envelope.event_id), 'Answered across organizations.');
    expect(await handleOf(envelope.event_id).result()).toMatchObject({
      status: 'replied',
      runStatus: 'succeeded',
      memberId: member.memberId,
    });
    const start = slack.calls.find((c) => c.method === 'chat.startStream' && c.body.thread_ts === mention.ts)!;
    expect(start.body).toMatchObject({ channel: 'C0SHARED01', recipient_user_id: user, recipient_team_id: PARTNER });
    const reply = slack.messages.find((m) => m.thread_ts === mention.ts && m.stream);
    expect(reply?.stream?.markdown).toContain('Answered across organizations.');
  }, 60_000);

  it('from an unlinked partner-workspace user: prompted to connect as any unlinked user, and routed once linked', async () => {
    const member = await loop.org.addMember('member');
    const user = newSlackUserId();
    const mention = appMention(user, 'who am I?', 'C0SHARED02');
    const envelope = sharedChannelEnvelope(connection, mention, { ownerTeamId: PARTNER, userTeamId: PARTNER });
    expect((await postSlackEvent(stack, connection, envelope)).json).toEqual({ ok: true });
    const prompt = await slack.waitForCall('chat.postEphemeral', (c) => c.body.user === user, 20_000);
    expect(prompt.body).toMatchObject({ channel: 'C0SHARED02', user });
    expect(await handleOf(envelope.event_id).query(slackEventStateQuery)).toMatchObject({ status: 'awaiting_link' });
    const linked = await stack.request('POST', '/v1/integrations/slack/account-links', {
      headers: member.headers,
      body: { code: linkCodeFrom(String(prompt.body.text)) },
    });
    expect(linked.status).toBe(201);
    expect(await runOf(envelope.event_id)).toEqual(expect.any(String));
  }, 60_000);

  it("refused 403 when neither team_id nor authorizations name the connection's workspace", async () => {
    const foreign = { ...sharedChannelEnvelope(connection, appMention(newSlackUserId()), { ownerTeamId: OWNER, userTeamId: PARTNER }) };
    foreign.authorizations = [{ ...foreign.authorizations[0]!, team_id: PARTNER }];
    const res = await postSlackEvent(stack, connection, foreign);
    expect(res.status).toBe(403);
    expect(res.json).toEqual({ ok: false });
    expect(
      await handleOf(foreign.event_id)
        .describe()
        .catch(() => 'none'),
    ).toBe('none');
  });
});

describe('an Enterprise Grid org-wide install (the connection has an enterprise id)', () => {
  it('takes a mention from another workspace of the organization, named in authorizations by its enterprise_id: 200, routed', async () => {
    const enterpriseId = 'EGRID000001';
    const grid = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, loop.org.organizationId, {
      slack,
      enterpriseId,
    });
    const member = await loop.org.addMember('member');
    const user = await linkSlackUser(stack, grid, member);
    // An org-wide install's authorization names the organization, no workspace of its own.
    const envelope = (enterprise: string) => ({
      ...sharedChannelEnvelope(grid, appMention(user, 'from across the grid', 'C0GRID0001'), { ownerTeamId: OWNER, userTeamId: PARTNER }),
      authorizations: [{ enterprise_id: enterprise, team_id: null, user_id: grid.botUserId, is_bot: true, is_enterprise_install: true }],
    });
    const ours = envelope(enterpriseId);
    const res = await postSlackEvent(stack, grid, ours);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
    const routed = await waitFor(
      async () => {
        const state = await stack.services.temporal.client.workflow
          .getHandle(slackEventWorkflowId(grid.connectionId, ours.event_id))
          .query(slackEventStateQuery);
        return state.status === 'run_created' ? state : undefined;
      },
      20_000,
      { what: 'the run of the mention' },
    );
    expect(routed).toMatchObject({ memberId: member.memberId, runId: expect.any(String) });
    // Another organization's org-wide install is not this connection.
    expect((await postSlackEvent(stack, grid, envelope('EOTHER00001'))).status).toBe(403);
  }, 60_000);
});

describe('app_rate_limited', () => {
  const notice = (teamId: string, minute: number) => ({
    token: 'deprecated',
    type: 'app_rate_limited',
    team_id: teamId,
    minute_rate_limited: minute,
    api_app_id: connection.appId,
  });
  const view = async () =>
    (await stack.request('GET', `/v1/integrations/slack/connections/${connection.connectionId}`, { headers: loop.org.owner.headers })).json;
  const counted = async () =>
    Number(/^den_slack_events_rate_limited_total (\d+)/m.exec((await stack.request('GET', '/metrics')).text)?.[1] ?? NaN);

  it('is recorded on the connection, shown by GET …/connections/{id}, and counted once a minute', async () => {
    expect(await view()).toMatchObject({ eventsRateLimitedAt: null, eventsRateLimitedMinutes: 0 });
    const before = await counted();
    const minute = 1_795_000_020;
    for (const body of [notice(connection.teamId, minute), notice(connection.teamId, minute)]) {
      const res = await postSlackEvent(stack, connection, body);
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ ok: true });
    }
    expect(await view()).toMatchObject({ eventsRateLimitedAt: new Date(minute * 1000).toISOString(), eventsRateLimitedMinutes: 1 });
    expect((await postSlackEvent(stack, connection, notice(connection.teamId, minute + 60))).status).toBe(200);
    expect(await view()).toMatchObject({ eventsRateLimitedAt: new Date((minute + 60) * 1000).toISOString(), eventsRateLimitedMinutes: 2 });
    expect((await counted()) - before).toBe(2);
  });

  it("is matched on api_app_id and the top-level team_id: another workspace's notice is refused 403, not recorded", async () => {
    const before = (await view()).eventsRateLimitedMinutes;
    expect((await postSlackEvent(stack, connection, notice(PARTNER, 1_795_000_200))).status).toBe(403);
    expect((await postSlackEvent(stack, connection, { ...notice(connection.teamId, 1_795_000_260), api_app_id: 'AOTHER' })).status).toBe(
      403,
    );
    expect((await view()).eventsRateLimitedMinutes).toBe(before);
  });
});

it("an event of the connection's own workspace still needs nothing but its team_id (envelopes without authorizations)", async () => {
  const res = await postSlackEvent(stack, connection, eventEnvelope(connection, appMention(newSlackUserId())));
  expect(res.status).toBe(200);
});
