/**
 * The whole loop, as a member and their runtime see it: slash command → link → app_mention →
 * a queued run → the runtime (this test) claims it and reports events →
 * "Working on it…" in the Slack thread, replaced by the answer.
 */
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import type { TestMember } from '../harness/identity';
import {
  appMention,
  eventEnvelope,
  linkTokenFrom,
  markRuntimeOnline,
  newSlackUserId,
  postSlackEvent,
  postSlashCommand,
  startSlackLoop,
  type FakeSlack,
  type TestSlackConnection,
} from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
let slack: FakeSlack;
let org: Awaited<ReturnType<typeof startSlackLoop>>['org'];
let connection: TestSlackConnection;

beforeAll(async () => {
  loop = await startSlackLoop();
  ({ stack, slack, org, connection } = loop);
});
afterAll(() => loop.stop());

/** Steps 1–4: link through a real slash command, mention the bot, find the queued run. */
async function mentionAsLinkedMember(member: TestMember, text: string) {
  const slackUserId = newSlackUserId();
  const command = await postSlashCommand(stack, connection, { user_id: slackUserId });
  expect(command.status).toBe(200);
  const linked = await stack.request('POST', `/v1/integrations/slack/${connection.connectionId}/account-links`, {
    headers: member.headers,
    body: { token: linkTokenFrom(command.json.text) },
  });
  expect(linked.status).toBe(201);
  expect(linked.json).toEqual({ connectionId: connection.connectionId, slackUserId, memberId: member.memberId });
  // The member's runtime (this test) is there.
  await markRuntimeOnline(stack, member);

  const mention = appMention(slackUserId, text);
  const envelope = eventEnvelope(connection, mention);
  const res = await postSlackEvent(stack, connection, envelope);
  expect(res.status).toBe(200);
  expect(res.json).toEqual({ ok: true });

  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  const state = await waitFor(
    async () => {
      const s = await handle.query(slackEventStateQuery);
      return s.status === 'run_created' ? s : undefined;
    },
    15_000,
    { what: 'run_created' },
  );
  const runId = state.runId!;
  const queued = await waitFor(
    async () => {
      const list = await stack.request('GET', '/v1/automation-runs?status=queued', { headers: member.headers });
      expect(list.status).toBe(200);
      return (list.json.runs as { id: string; status: string; memberId: string | null }[]).find((r) => r.id === runId);
    },
    15_000,
    { what: 'the run in GET /v1/automation-runs?status=queued' },
  );
  expect(queued).toMatchObject({
    id: runId,
    status: 'queued',
    memberId: member.memberId,
    // The work itself: what was asked (bot mention removed) and where the answer goes.
    input: { text },
    origin: {
      kind: 'slack',
      connectionId: connection.connectionId,
      teamId: connection.teamId,
      channelId: mention.channel,
      threadTs: mention.ts,
      userId: slackUserId,
    },
  });
  return { mention, handle, runId };
}

describe('Slack → run → Slack', () => {
  it('posts the last assistant text to the thread when the run succeeds', async () => {
    const member = await org.addMember('member');
    const { mention, handle, runId } = await mentionAsLinkedMember(member, 'what is six times seven?');
    const runtime = (path: string, body: unknown) =>
      stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/${path}`, { headers: member.headers, body });

    // Step 5: the runtime claims the run and reports, terminal last.
    expect((await runtime('claim', {})).json).toMatchObject({ attempt: 1, run: { id: runId, status: 'running' } });
    expect((await runtime('heartbeat', { attempt: 1 })).json).toEqual({
      ok: true,
      leaseExpiresAt: expect.any(Number),
      cancelRequested: false,
      attempt: 1,
      leaseValid: true,
    });
    const events = [
      { type: 'user', payload: { text: 'what is six times seven?' } },
      { type: 'assistant', payload: { text: 'Thinking…' } },
      { type: 'assistant', payload: { text: 'Six times seven is *42*.' } },
      { type: 'terminal', payload: { status: 'succeeded' } },
    ];
    for (const [index, event] of events.entries()) {
      const res = await runtime('events', { attempt: 1, sequence: index + 1, createdAt: Date.now(), ...event });
      expect(res.status).toBe(200);
    }

    // Step 6: one message in the mention's thread, posted as the run started, now the answer
    // (the runtime's Markdown as Slack mrkdwn: *42* is emphasis, Slack's _42_).
    const post = await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
    expect(post.body).toMatchObject({
      channel: mention.channel,
      thread_ts: mention.ts,
      text: 'Working on it…',
      // The invocation's key, so a retry can find this reply instead of posting it twice.
      metadata: { event_type: 'den_run_reply', event_payload: { reply_key: handle.workflowId } },
    });
    expect(post.authorization).toMatch(/^Bearer xoxb-test-/);
    const final = await handle.result();
    expect(final).toMatchObject({ status: 'replied', runStatus: 'succeeded', memberId: member.memberId, runId });
    const thread = slack.messages.filter((m) => m.thread_ts === mention.ts);
    expect(thread.map((m) => m.text.replace(/\u200b/g, ''))).toEqual(['Six times seven is _42_.']);
  });

  it('posts a failure message when the run fails', async () => {
    const member = await org.addMember('member');
    const { mention, handle, runId } = await mentionAsLinkedMember(member, 'break please');
    const claim = await stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/claim`, { headers: member.headers });
    expect(claim.status).toBe(200);
    const res = await stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/events`, {
      headers: member.headers,
      body: { attempt: 1, sequence: 1, type: 'terminal', payload: { status: 'failed', error: 'tool_crashed' }, createdAt: Date.now() },
    });
    expect(res.status).toBe(200);
    expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'failed' });
    expect(slack.messages.filter((m) => m.thread_ts === mention.ts).map((m) => m.text)).toEqual(['The run failed (tool_crashed).']);
  });
});

describe('exactly one reply per run', () => {
  /** A linked member's mention, a claimed run and its terminal answer; returns the mention. */
  async function answeredRun(text: string) {
    const member = await org.addMember('member');
    const { mention, runId, handle } = await mentionAsLinkedMember(member, text);
    const runtime = (path: string, body: unknown) =>
      stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/${path}`, { headers: member.headers, body });
    expect((await runtime('claim', {})).status).toBe(200);
    expect(
      (await runtime('events', { attempt: 1, sequence: 1, type: 'assistant', payload: { text: `answer to ${text}` }, createdAt: 0 }))
        .status,
    ).toBe(200);
    expect((await runtime('events', { attempt: 1, sequence: 2, type: 'terminal', payload: {}, createdAt: 0 })).status).toBe(200);
    return { mention, handle };
  }
  const repliesIn = (mention: { channel: string; ts: string }) =>
    slack.messages.filter((m) => m.channel === mention.channel && m.thread_ts === mention.ts);
  const lookups = (mention: { ts: string }) => slack.calls.filter((c) => c.method === 'conversations.replies' && c.body.ts === mention.ts);

  it.each([
    ['answers internal_error after accepting the message', { status: 200, body: { ok: false, error: 'internal_error' }, accept: true }],
    [
      "accepts the message and hangs up before answering (as a worker stopped after Slack's 200 would leave it)",
      { status: 200, accept: true, reset: true },
    ],
  ])(
    'Slack %s: the retry finds the reply in the thread and posts nothing more',
    async (_case, reply) => {
      slack.script('chat.postMessage', reply);
      const text = `exactly once ${Math.random()}`;
      const { mention, handle } = await answeredRun(text);
      expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
      // The retry looked in the thread first (conversations.replies, with metadata), once, and found it.
      expect(lookups(mention)).toHaveLength(1);
      expect(repliesIn(mention)).toEqual([expect.objectContaining({ text: `answer to ${text}` })]);
    },
    60_000,
  );

  it('Slack cannot tell (the look-up answered 429): the retry posts once more with the same key, after one look-up, and the answer lands', async () => {
    slack.script('chat.postMessage', { status: 200, body: { ok: false, error: 'internal_error' }, accept: true });
    slack.script('conversations.replies', { status: 429, headers: { 'retry-after': '60' } });
    const text = `unknown ${Math.random()}`;
    const { mention, handle } = await answeredRun(text);
    expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
    expect(lookups(mention)).toHaveLength(1);
    const keys = repliesIn(mention).map((m) => (m.metadata as { event_payload?: { reply_key?: string } }).event_payload?.reply_key);
    // The first post Slack kept and the one posted again: both carry the invocation's key.
    expect(keys).toEqual([handle.workflowId, handle.workflowId]);
    expect(repliesIn(mention).map((m) => m.text)).toContain(`answer to ${text}`);
  }, 60_000);
});
