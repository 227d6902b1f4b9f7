/**
 * The slack-event workflow against a fake Slack Web API: unlinked users get an ephemeral
 * connect prompt and are resumed by the link, per-member limits, and Retry-After.
 */
import { randomUUID } from 'node:crypto';
import { runWorkflowId } from '../../src/runs/contract';
import { slackEventStateQuery, slackEventWorkflowId, type SlackEventState } from '../../src/slack/contract';
import { createTestOrg, type TestMember } from '../harness/identity';
import {
  appMention,
  createTestSlackConnection,
  directMessage,
  eventEnvelope,
  linkTokenFrom,
  newSlackUserId,
  postSlackEvent,
  postSlashCommand,
  startFakeSlack,
  type FakeSlack,
  type TestSlackConnection,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const LINK_WAIT_MS = 8000;
let stack: TestStack;
let slack: FakeSlack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
let connection: TestSlackConnection;

beforeAll(async () => {
  slack = await startFakeSlack();
  stack = await startTestStack({
    worker: true,
    env: {
      SLACK_API_BASE_URL: slack.url,
      SLACK_LINK_WAIT: `${LINK_WAIT_MS}`,
      SLACK_MEMBER_CONCURRENT_RUNS: '1',
      SLACK_MEMBER_DAILY_INVOCATIONS: '3',
      DASHBOARD_URL: 'https://den.example.test',
    },
  });
  org = await createTestOrg(stack.services.database.db);
  connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
});
afterAll(async () => {
  await stack.stop();
  await slack.close();
});

const handleOf = (eventId: string, via = connection) =>
  stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(via.connectionId, eventId));

async function stateOf(eventId: string, via = connection): Promise<SlackEventState> {
  return handleOf(eventId, via).query(slackEventStateQuery);
}

async function waitForStatus(eventId: string, status: SlackEventState['status'], timeoutMs = 15_000, via = connection) {
  return waitFor(
    async () => {
      const state = await stateOf(eventId, via);
      return state.status === status ? state : undefined;
    },
    timeoutMs,
    { what: `slack event ${eventId} to reach ${status}` },
  );
}

async function send(event: Record<string, unknown>, via = connection): Promise<string> {
  const envelope = eventEnvelope(via, event);
  const res = await postSlackEvent(stack, via, envelope);
  expect(res.status).toBe(200);
  expect(res.json).toEqual({ ok: true });
  return envelope.event_id;
}

async function link(member: TestMember, slackUserId: string, via = connection) {
  const command = await postSlashCommand(stack, via, { user_id: slackUserId });
  const res = await stack.request('POST', `/v1/integrations/slack/${via.connectionId}/account-links`, {
    headers: member.headers,
    body: { token: linkTokenFrom(command.json.text) },
  });
  expect(res.status).toBe(201);
}

describe('an unlinked Slack user', () => {
  it('gets an ephemeral connect prompt, and linking within the window resumes the invocation', async () => {
    const user = newSlackUserId();
    const mention = appMention(user, 'what is the weather');
    const eventId = await send(mention);
    await waitForStatus(eventId, 'awaiting_link');

    const prompt = await slack.waitForCall('chat.postEphemeral', (c) => c.body.user === user);
    expect(prompt.authorization).toBe(`Bearer xoxb-test-${connection.teamId.slice(1)}`);
    expect(prompt.body).toMatchObject({ channel: mention.channel, user });
    expect(prompt.body.text).toMatch(/<https:\/\/den\.example\.test\/connect\/slack\?token=[^|]+\|Connect your account>/);
    const pending = await stack.services.database.db
      .selectFrom('slack_pending_invocations')
      .select('workflow_id')
      .where('connection_id', '=', connection.connectionId)
      .where('slack_user_id', '=', user)
      .execute();
    expect(pending).toEqual([{ workflow_id: slackEventWorkflowId(connection.connectionId, eventId) }]);

    // The member redeems the link from the ephemeral message itself.
    const member = await org.addMember('member');
    const res = await stack.request('POST', `/v1/integrations/slack/${connection.connectionId}/account-links`, {
      headers: member.headers,
      body: { token: linkTokenFrom(prompt.body.text as string) },
    });
    expect(res.status).toBe(201);

    const state = await waitForStatus(eventId, 'run_created');
    expect(state.memberId).toBe(member.memberId);
    expect(state.runId).toEqual(expect.any(String));
    // The run exists, as a child workflow of the invocation. The status is set in the workflow
    // task that asks Temporal to start the child, so the child may start a moment later.
    const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, state.runId!));
    const run = await waitFor(() => handle.describe(), 10_000, { what: 'the run child workflow' });
    expect(run.type).toBe('automationRun');
    expect(run.parentExecution?.workflowId).toBe(slackEventWorkflowId(connection.connectionId, eventId));
    const left = await stack.services.database.db
      .selectFrom('slack_pending_invocations')
      .select('event_id')
      .where('connection_id', '=', connection.connectionId)
      .where('slack_user_id', '=', user)
      .execute();
    expect(left).toEqual([]);
    await stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, state.runId!)).terminate('test done');
  });

  it('expires after SLACK_LINK_WAIT when nobody links', async () => {
    const user = newSlackUserId();
    const eventId = await send(directMessage(user, 'anyone?'));
    await waitForStatus(eventId, 'awaiting_link');
    const started = Date.now();
    const result = await handleOf(eventId).result();
    expect(result.status).toBe('link_expired');
    expect(Date.now() - started).toBeLessThan(LINK_WAIT_MS + 5000);
  });

  it('with no bot token: waits for the link without calling Slack', async () => {
    const silent = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, {
      botToken: null,
    });
    const user = newSlackUserId();
    const eventId = await send(appMention(user), silent);
    await waitForStatus(eventId, 'awaiting_link', 15_000, silent);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(slack.calls.filter((c) => c.body.user === user)).toEqual([]);
    await handleOf(eventId, silent).terminate('test done');
  });

  it('the prompt honours Retry-After when Slack rate-limits', async () => {
    const user = newSlackUserId();
    slack.script('chat.postEphemeral', { status: 429, headers: { 'retry-after': '2' }, body: { ok: false, error: 'ratelimited' } });
    const eventId = await send(appMention(user));
    const second = await waitFor(
      () => {
        const calls = slack.calls.filter((c) => c.method === 'chat.postEphemeral' && c.body.user === user);
        return calls.length >= 2 ? calls : undefined;
      },
      15_000,
      { what: 'a retried chat.postEphemeral' },
    );
    expect(second[1]!.at - second[0]!.at).toBeGreaterThanOrEqual(1900);
    await handleOf(eventId).terminate('test done');
  });
});

describe('per-member limits', () => {
  it('over the concurrent limit: no run, and an ephemeral notice', async () => {
    const member = await org.addMember('member');
    const user = newSlackUserId();
    await link(member, user);
    const first = await send(appMention(user, 'first'));
    const firstState = await waitForStatus(first, 'run_created');
    const second = await send(appMention(user, 'second'));
    const limited = await waitForStatus(second, 'limited');
    expect(limited).toMatchObject({ detail: 'concurrent', runId: null, memberId: member.memberId });
    const notice = await slack.waitForCall('chat.postEphemeral', (c) => c.body.user === user);
    expect(notice.body.text).toMatch(/already have 1 den request running/);
    await stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, firstState.runId!)).terminate('test done');
  });

  it('over the rolling-day limit: no run, and an ephemeral notice', async () => {
    const member = await org.addMember('member');
    const user = newSlackUserId();
    await link(member, user);
    // Three finished invocations in the last day (the limit in this stack is 3).
    const now = Date.now();
    await stack.services.database.db
      .insertInto('slack_member_invocations')
      .values(
        [1, 2, 3].map((n) => ({
          connection_id: connection.connectionId,
          event_id: `EvOLD${randomUUID()}`,
          organization_id: org.organizationId,
          member_id: member.memberId,
          run_id: `old-${n}`,
          started_at: new Date(now - n * 3_600_000),
          ended_at: new Date(now - n * 3_600_000 + 60_000),
        })),
      )
      .execute();
    const eventId = await send(directMessage(user, 'one more'));
    const limited = await waitForStatus(eventId, 'limited');
    expect(limited.detail).toBe('daily');
    const notice = await slack.waitForCall('chat.postEphemeral', (c) => c.body.user === user);
    expect(notice.body.text).toMatch(/limit of 3 den requests/);
  });
});
