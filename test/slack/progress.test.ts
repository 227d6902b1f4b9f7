/**
 * One message per invocation, kept current: a linked member's mention gets "Working on it…" with
 * a Cancel button at once, the run's progress edits it (chat.update, throttled on a workflow
 * timer) and its answer replaces it. The runtime here is the test, reporting over HTTP.
 */
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { CANCEL_ACTION_ID } from '../../src/slack/progress';
import type { TestMember } from '../harness/identity';
import {
  appMention,
  eventEnvelope,
  linkSlackUser,
  markRuntimeOnline,
  postSlackEvent,
  startSlackLoop,
  type FakeSlack,
} from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const INTERVAL_MS = 1500;
let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
let slack: FakeSlack;

beforeAll(async () => {
  loop = await startSlackLoop({ SLACK_PROGRESS_INTERVAL: String(INTERVAL_MS), SLACK_REPLY_MODE: 'edit' });
  ({ stack, slack } = loop);
});
afterAll(() => loop.stop());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A linked member mentions the bot; the test claims the run as the member's runtime would. */
async function mentionAndClaim(text: string) {
  const member: TestMember = await loop.org.addMember('member');
  const slackUserId = await linkSlackUser(stack, loop.connection, member);
  await markRuntimeOnline(stack, member);
  const mention = appMention(slackUserId, text);
  const envelope = eventEnvelope(loop.connection, mention);
  const sentAt = Date.now();
  expect((await postSlackEvent(stack, loop.connection, envelope)).json).toEqual({ ok: true });
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(loop.connection.connectionId, envelope.event_id));
  const state = await waitFor(
    async () => {
      const s = await handle.query(slackEventStateQuery);
      return s.runId ? s : undefined;
    },
    15_000,
    { what: 'the run id' },
  );
  const runId = state.runId!;
  const runtime = (path: string, body: unknown) =>
    stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/${path}`, { headers: member.headers, body });
  // The child run starts a moment after the invocation records its id.
  await waitFor(async () => (await runtime('claim', {})).status === 200, 15_000, { what: 'the claim of the run' });
  let sequence = 0;
  const report = async (type: string, payload: Record<string, unknown>) => {
    const res = await runtime('events', { attempt: 1, sequence: ++sequence, type, payload, createdAt: Date.now() });
    expect(res.status).toBe(200);
  };
  return { mention, handle, runId, sentAt, report };
}

const inThread = (mention: { channel: string; ts: string }) =>
  slack.messages.filter((m) => m.channel === mention.channel && m.thread_ts === mention.ts);
const postsIn = (mention: { ts: string }) => slack.calls.filter((c) => c.method === 'chat.postMessage' && c.body.thread_ts === mention.ts);

it('posts one message at once, edits it with growing text no closer than the interval, and ends with the answer', async () => {
  const { mention, handle, runId, sentAt, report } = await mentionAndClaim('count to three');
  const accepted = await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
  expect(accepted.at - sentAt).toBeLessThan(2000);
  expect(accepted.body.text).toBe('Working on it…');
  expect(accepted.body.blocks).toContainEqual({
    type: 'actions',
    elements: [expect.objectContaining({ type: 'button', action_id: CANCEL_ACTION_ID, value: runId })],
  });

  const lines = ['line one', 'line one\nline two', 'line one\nline two\nline three'];
  for (const text of lines) {
    await report('assistant', { text });
    await sleep(1000);
  }
  await report('terminal', { status: 'succeeded' });
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });

  const [message, ...others] = inThread(mention);
  expect(others).toEqual([]);
  expect(postsIn(mention)).toHaveLength(1);
  const edits = message!.edits;
  expect(edits.length).toBeGreaterThanOrEqual(2);
  // Growing text, never closer together than the interval (the post counts as the first edit).
  for (const [index, edit] of edits.entries()) {
    const before = index === 0 ? accepted.at : edits[index - 1]!.at;
    expect(edit.at - before).toBeGreaterThanOrEqual(INTERVAL_MS - 50);
    if (index > 0) expect(edit.text.length).toBeGreaterThanOrEqual(edits[index - 1]!.text.length);
  }
  expect(message!.text).toBe(lines.at(-1));
  // The answer takes the Cancel button away.
  expect(JSON.stringify(message!.blocks)).not.toContain(CANCEL_ACTION_ID);
}, 60_000);

it('shows the tool a run is using', async () => {
  const { mention, handle, report } = await mentionAndClaim('search something');
  await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
  await report('capability_execution', { tool: 'web_search' });
  await waitFor(() => inThread(mention)[0]?.edits.find((e) => e.text === '_using web_search…_'), 10_000, { what: 'the tool line' });
  await report('terminal', { status: 'failed', error: 'search_down' });
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'failed' });
  expect(inThread(mention).map((m) => m.text)).toEqual(['The run failed (search_down).']);
}, 60_000);

it('a 429 on chat.update waits for Retry-After, and the last state still lands', async () => {
  const { mention, handle, report } = await mentionAndClaim('rate limit me');
  await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
  slack.script('chat.update', { status: 429, headers: { 'retry-after': '2' }, body: { ok: false, error: 'ratelimited' } });
  await report('assistant', { text: 'first' });
  const limited = await slack.waitForCall('chat.update', (c) => c.body.text === 'first');
  await report('assistant', { text: 'second' });
  await report('terminal', {});
  expect(await handle.result()).toMatchObject({ status: 'replied' });
  const [message] = inThread(mention);
  expect(message!.text).toBe('second');
  // Nothing went out before Slack's Retry-After had passed, and the stale state was dropped.
  const after = slack.calls.filter((c) => c.method === 'chat.update' && c.at > limited.at && c.body.ts === message!.ts);
  expect(after.length).toBeGreaterThanOrEqual(1);
  expect(after[0]!.at - limited.at).toBeGreaterThanOrEqual(1950);
  expect(message!.edits.map((e) => e.text)).toEqual(['second']);
}, 60_000);

it('a message someone deleted: the answer comes as a new reply', async () => {
  const { mention, handle, report } = await mentionAndClaim('delete me');
  const accepted = await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
  const ts = inThread(mention)[0]!.ts;
  slack.deleteMessage(mention.channel, ts);
  await report('assistant', { text: 'the answer' });
  await report('terminal', {});
  expect(await handle.result()).toMatchObject({ status: 'replied' });
  expect(inThread(mention).map((m) => m.text)).toEqual(['the answer']);
  expect(slack.calls.some((c) => c.method === 'chat.update' && c.body.ts === ts && c.at > accepted.at)).toBe(true);
}, 60_000);

it('a long answer fills the message and goes on as replies; Markdown becomes mrkdwn', async () => {
  const { mention, handle, report } = await mentionAndClaim('write a lot');
  await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
  const paragraph = `**Bold** start. ${'word '.repeat(400).trim()}`;
  await report('assistant', { text: [paragraph, paragraph, paragraph].join('\n\n') });
  await report('terminal', {});
  expect(await handle.result()).toMatchObject({ status: 'replied' });
  const messages = inThread(mention);
  expect(messages.length).toBeGreaterThanOrEqual(2);
  for (const message of messages) expect(message.text.length).toBeLessThanOrEqual(3000);
  expect(messages[0]!.text).toContain('*Bold*');
  expect(
    messages
      .map((m) => m.text)
      .join(' ')
      .match(/word/g),
  ).toHaveLength(1200);
}, 60_000);
