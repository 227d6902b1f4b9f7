/**
 * The Slack thread as Slack really behaves, over the real stack with `den runtime --exec` as a
 * child process, against the strict fake Slack (test/harness/fake-slack.ts):
 * - a final edit Slack refuses (`edit_window_closed`, `cant_update_message`) lands as a new reply;
 * - a final answer still rate-limited at SLACK_FINAL_DELIVERY_DEADLINE ends `reply_failed`, saying why;
 * - five runs at once in one workspace all get their answers under its chat.update limit, and no
 *   429 reaches a final answer (the workspace budget);
 * - a Cancel whose Update takes 2.5 s to be recorded is answered through `response_url` within 3 s;
 * - a streamed run shows its text through chat.appendStream, not chat.update, and ends with
 *   chat.stopStream holding the answer;
 * - a direct message with a file (`file_share`) is answered;
 * - a `tokens_revoked` of user tokens only leaves the connection enabled.
 *
 * The fake enforces Slack's own limits (Tier 3: 50 calls a minute per workspace). Only the runs'
 * pace is scaled, 1:10: the progress interval is 300 ms for Slack's 3 s, and the runtime reports
 * its output every 100 ms, so five runs of 12 s want more edits than a minute allows.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { slackEventWorkflowId } from '../../src/slack/contract';
import { CANCEL_ACTION_ID, SUPERSEDED_TEXT } from '../../src/slack/progress';
import type { TestMember } from '../harness/identity';
import { startScriptRuntime, stopRuntimes, type Spawned } from '../harness/process';
import {
  appMention,
  blockActions,
  createTestSlackConnection,
  directMessage,
  eventEnvelope,
  linkSlackUser,
  postInteraction,
  postSlackEvent,
  startSlackLoop,
  unsafeMrkdwn,
  type FakeSlack,
} from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
let slack: FakeSlack;
let dir: string;
const runtimes: Spawned[] = [];

beforeAll(async () => {
  loop = await startSlackLoop({ SLACK_PROGRESS_INTERVAL: '300ms', SLACK_MEMBER_CONCURRENT_RUNS: '5', SLACK_REPLY_MODE: 'edit' });
  ({ stack, slack } = loop);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-thread-delivery-'));
}, 60_000);
afterAll(async () => {
  await stopRuntimes(runtimes);
  await loop.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** `den runtime --exec` for a member of `on`'s organization (the shared loop's by default), reporting its output every 100 ms. */
const startRuntime = (member: TestMember, script: string, on: { url: string } = stack) =>
  startScriptRuntime({ url: on.url, apiKey: member.apiKey }, { dir, name: member.memberId, text: script }, runtimes);

async function mentionFrom(slackUserId: string, text: string, event = appMention(slackUserId, text), connection = loop.connection) {
  const envelope = eventEnvelope(connection, event);
  expect((await postSlackEvent(stack, connection, envelope)).json).toEqual({ ok: true });
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  return { mention: event, handle };
}

const threadOf = (mention: { channel: string; ts: string }) =>
  slack.messages.filter((m) => m.channel === mention.channel && m.thread_ts === mention.ts);

it('a final edit answered edit_window_closed lands as a new reply, and the first message loses its Cancel button', async () => {
  const member = await loop.org.addMember('member');
  const slackUserId = await linkSlackUser(stack, loop.connection, member);
  await startRuntime(member, 'sleep 2; echo "the answer"');
  slack.configure({ editWindowMs: 1_000 });
  try {
    const { mention, handle } = await mentionFrom(slackUserId, 'late answer');
    expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
    const refused = slack.calls.filter((c) => c.method === 'chat.update' && c.error === 'edit_window_closed');
    expect(refused.length).toBeGreaterThanOrEqual(1);
    const thread = threadOf(mention);
    // The answer as a reply of its own; the first message, which Slack would not let us edit, deleted.
    expect(thread.map((m) => m.text)).toEqual(['the answer']);
    expect(JSON.stringify(thread[0]!.blocks ?? null)).not.toContain(CANCEL_ACTION_ID);
    expect(slack.calls.some((c) => c.method === 'chat.delete' && c.body.channel === mention.channel)).toBe(true);
  } finally {
    slack.configure({ editWindowMs: undefined });
  }
}, 120_000);

it('a message Slack will not let us edit (cant_update_message) still gets the answer, as a reply', async () => {
  const member = await loop.org.addMember('member');
  const slackUserId = await linkSlackUser(stack, loop.connection, member);
  await startRuntime(member, 'sleep 2; echo "answered anyway"');
  const { mention, handle } = await mentionFrom(slackUserId, 'no edits');
  const first = await waitFor(() => threadOf(mention)[0], 30_000, { what: 'the first message' });
  slack.refuseEdits(mention.channel, first.ts);
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  expect(slack.calls.some((c) => c.method === 'chat.update' && c.error === 'cant_update_message')).toBe(true);
  const replies = threadOf(mention).filter((m) => m.ts !== first.ts);
  expect(replies.map((m) => m.text)).toContain('answered anyway');
}, 120_000);

it('a final answer Slack keeps rate-limiting past SLACK_FINAL_DELIVERY_DEADLINE ends reply_failed, saying why', async () => {
  const deadlineLoop = await startSlackLoop({ SLACK_FINAL_DELIVERY_DEADLINE: '5s', SLACK_REPLY_MODE: 'edit' });
  try {
    const member = await deadlineLoop.org.addMember('member');
    const slackUserId = await linkSlackUser(deadlineLoop.stack, deadlineLoop.connection, member);
    await startRuntime(member, 'sleep 2; echo "too late"', deadlineLoop.stack);
    const mention = appMention(slackUserId, 'never lands');
    const envelope = eventEnvelope(deadlineLoop.connection, mention);
    await postSlackEvent(deadlineLoop.stack, deadlineLoop.connection, envelope);
    await deadlineLoop.slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
    // From here every edit and post is answered 429 with a wait longer than the deadline.
    const limited = { status: 429, headers: { 'retry-after': '30' }, body: { ok: false, error: 'ratelimited' } };
    deadlineLoop.slack.script('chat.update', ...Array.from({ length: 20 }, () => limited));
    deadlineLoop.slack.script('chat.postMessage', ...Array.from({ length: 20 }, () => limited));
    const handle = deadlineLoop.stack.services.temporal.client.workflow.getHandle(
      slackEventWorkflowId(deadlineLoop.connection.connectionId, envelope.event_id),
    );
    expect(await handle.result()).toMatchObject({ status: 'reply_failed', detail: 'rate_limited_until_deadline', runStatus: 'succeeded' });
    expect(deadlineLoop.slack.messages.map((m) => m.text).join('\n')).not.toContain('too late');
  } finally {
    await deadlineLoop.stop();
  }
}, 120_000);

it('a final edit refused for its content (msg_too_long) lands as a reply, and the first message says so', async () => {
  const member = await loop.org.addMember('member');
  const slackUserId = await linkSlackUser(stack, loop.connection, member);
  await startRuntime(member, 'sleep 1; echo "refused once"');
  const { mention, handle } = await mentionFrom(slackUserId, 'too long');
  await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
  // The next final-looking edit (no Cancel button) is refused once for its size, as Slack would.
  const before = slack.calls.length;
  await waitFor(() => slack.calls.slice(before).some((c) => c.method === 'chat.update'), 20_000, { what: 'a progress edit' }).catch(
    () => undefined,
  );
  slack.script('chat.update', { status: 200, body: { ok: false, error: 'msg_too_long' } });
  expect(await handle.result()).toMatchObject({ status: 'replied' });
  const thread = threadOf(mention);
  expect(thread.map((m) => m.text)).toContain('refused once');
  expect(thread.map((m) => m.text)).toContain(SUPERSEDED_TEXT);
}, 120_000);

it('five runs at once in one workspace: every answer lands, and no 429 reaches a final answer', async () => {
  // A workspace of its own: its own bot token, so its own limits at the fake and its own budget.
  const workspace = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, loop.org.organizationId, {
    slack: loop.slack,
  });
  const started = Date.now();
  const members = await Promise.all(Array.from({ length: 5 }, () => loop.org.addMember('member')));
  const users = await Promise.all(members.map((member) => linkSlackUser(stack, workspace, member)));
  // 12 s of output, a line every 50 ms: each run wants an edit every interval.
  const script = 'i=0; while [ $i -lt 240 ]; do echo "line $i"; i=$((i+1)); sleep 0.05; done; echo "answer $(cat)"';
  await Promise.all(members.map((member) => startRuntime(member, script)));
  const invocations = await Promise.all(users.map((user, index) => mentionFrom(user, `run ${index}`, undefined, workspace)));
  const results = await Promise.all(invocations.map(({ handle }) => handle.result()));
  for (const result of results) expect(result).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  const ours = (c: { authorization: string | undefined; at: number }) =>
    c.at >= started && c.authorization?.endsWith(workspace.teamId.slice(1));
  const finals = slack.calls.filter(
    (c) => c.method === 'chat.update' && ours(c) && !JSON.stringify(c.body.blocks ?? '').includes(CANCEL_ACTION_ID),
  );
  expect(finals.filter((c) => c.status === 429)).toEqual([]);
  for (const [index, { mention }] of invocations.entries()) {
    const texts = threadOf(mention).map((m) => m.text);
    expect(texts.join('\n')).toContain(`answer run ${index}`);
  }
  const edits = slack.calls.filter((c) => c.method === 'chat.update' && ours(c));
  expect(finals).toHaveLength(5);
  // The edits the runs wanted exceed the workspace's limit: the budget held them to it.
  console.log(`five runs: ${edits.length} chat.update calls, ${edits.filter((c) => c.status === 429).length} answered 429`);
}, 180_000);

it('a Cancel whose Update takes 2.5 s is answered through response_url within 3 s, and never as failed', async () => {
  const member = await loop.org.addMember('member');
  const slackUserId = await linkSlackUser(stack, loop.connection, member);
  await startRuntime(member, 'echo started; sleep 30');
  const { mention, handle } = await mentionFrom(slackUserId, 'cancel me slowly');
  const posted = await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts, 30_000);
  const button = (posted.body.blocks as { elements?: { action_id: string; value: string }[] }[])
    .flatMap((b) => b.elements ?? [])
    .find((e) => e.action_id === CANCEL_ACTION_ID)!;
  const runId = button.value;
  const db = stack.services.database.db;
  await waitFor(
    async () =>
      (await db.selectFrom('automation_runs').select('status').where('run_id', '=', runId).executeTakeFirst())?.status === 'running',
    30_000,
    { what: 'the run running' },
  );
  // Postgres holds the run's row for 2.5 s: the run records the cancel (and answers its Update) only after.
  let locked!: () => void;
  const held = new Promise<void>((resolve) => (locked = resolve));
  const lock = db.transaction().execute(async (trx) => {
    await sql`SELECT 1 FROM automation_runs WHERE run_id = ${runId} FOR UPDATE`.execute(trx);
    locked();
    await new Promise((resolve) => setTimeout(resolve, 2_500));
  });
  await held;
  const responseUrl = slack.responseUrl(`T/${runId}`);
  const clickedAt = Date.now();
  const click = await postInteraction(
    stack,
    loop.connection,
    blockActions(loop.connection, {
      user: slackUserId,
      actionId: CANCEL_ACTION_ID,
      value: runId,
      channel: mention.channel,
      threadTs: mention.ts,
      responseUrl,
    }),
  );
  expect(click.status).toBe(200);
  expect(Date.now() - clickedAt).toBeLessThan(3_000);
  const answer = await slack.waitForCall('response_url', (c) => c.at >= clickedAt, 5_000);
  expect(answer.at - clickedAt).toBeLessThan(3_000);
  // Taken (the run accepted it), or not yet confirmed while the run's worker is busy: never refused.
  expect(answer.body).toMatchObject({
    response_type: 'ephemeral',
    text: expect.stringMatching(/^(Cancelling the run|Asking the run to stop)/),
  });
  await lock;
  expect(await handle.result()).toMatchObject({ runStatus: 'cancelled' });
  const told = slack.calls.filter((c) => c.method === 'response_url' && c.at >= clickedAt).map((c) => String(c.body.text));
  expect(told.filter((text) => /could not|failed/i.test(text))).toEqual([]);
}, 120_000);

it('a streamed run shows its text through chat.appendStream, not chat.update, and ends with chat.stopStream holding the answer', async () => {
  const streamLoop = await startSlackLoop({ SLACK_PROGRESS_INTERVAL: '300ms', SLACK_REPLY_MODE: 'auto' });
  try {
    const member = await streamLoop.org.addMember('member');
    const slackUserId = await linkSlackUser(streamLoop.stack, streamLoop.connection, member);
    // A second between words: on a busy machine the run's events still arrive in more than one progress interval.
    await startRuntime(member, 'for w in one two three four; do echo "$w <!channel>"; sleep 1; done', streamLoop.stack);
    const mention = appMention(slackUserId, 'stream please');
    const envelope = eventEnvelope(streamLoop.connection, mention);
    await postSlackEvent(streamLoop.stack, streamLoop.connection, envelope);
    const handle = streamLoop.stack.services.temporal.client.workflow.getHandle(
      slackEventWorkflowId(streamLoop.connection.connectionId, envelope.event_id),
    );
    expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
    const calls = streamLoop.slack.calls;
    const start = calls.find((c) => c.method === 'chat.startStream')!;
    expect(start.body).toMatchObject({ channel: mention.channel, thread_ts: mention.ts, recipient_user_id: slackUserId });
    const appends = calls.filter((c) => c.method === 'chat.appendStream');
    expect(appends.length).toBeGreaterThanOrEqual(2);
    // No chat.update carried the run's text: only the first message's own status line at the end.
    expect(calls.filter((c) => c.method === 'chat.update' && /\bone\b/.test(String(c.body.text)))).toEqual([]);
    const stop = calls.find((c) => c.method === 'chat.stopStream')!;
    expect(stop).toBeDefined();
    const streamed = streamLoop.slack.messages.find((m) => m.stream)!;
    expect(streamed.stream!.stopped).toBe(true);
    expect(streamed.stream!.markdown).toMatch(
      /one &lt;!channel&gt;\s+two &lt;!channel&gt;\s+three &lt;!channel&gt;\s+four &lt;!channel&gt;/,
    );
    for (const call of [start, ...appends, stop]) {
      for (const text of call.rendered) expect(unsafeMrkdwn(text).filter((p) => p.startsWith('live'))).toEqual([]);
    }
  } finally {
    await streamLoop.stop();
  }
}, 180_000);

it('a direct message with a file (file_share) is answered, its file named in the input', async () => {
  const member = await loop.org.addMember('member');
  const slackUserId = await linkSlackUser(stack, loop.connection, member);
  await startRuntime(member, 'echo "got: $(cat)"');
  const dm = {
    ...directMessage(slackUserId, 'what is on this screenshot?'),
    subtype: 'file_share',
    files: [{ id: 'F1', name: 'screenshot.png' }],
  };
  const { handle } = await mentionFrom(slackUserId, '', dm);
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  const answered = slack.messages.find((m) => m.channel === dm.channel && m.thread_ts === dm.ts)!;
  expect(answered.text).toContain('got: what is on this screenshot?');
  expect(answered.text).toContain('Attached file: screenshot.png');
}, 120_000);

it('tokens_revoked of user tokens only leaves the connection enabled; of the bot token, disables it', async () => {
  const db = stack.services.database.db;
  const enabled = async () =>
    (await db.selectFrom('slack_connections').select('enabled').where('id', '=', loop.connection.connectionId).executeTakeFirstOrThrow())
      .enabled;
  const users = eventEnvelope(loop.connection, { type: 'tokens_revoked', tokens: { oauth: ['U1', 'U2'] } });
  expect((await postSlackEvent(stack, loop.connection, users)).json).toEqual({ ok: true });
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect(await enabled()).toBe(true);
  const bot = eventEnvelope(loop.connection, { type: 'tokens_revoked', tokens: { oauth: ['U1'], bot: [loop.connection.botUserId] } });
  expect((await postSlackEvent(stack, loop.connection, bot)).json).toEqual({ ok: true });
  await waitFor(async () => !(await enabled()), 10_000, { what: 'the connection disabled' });
});
