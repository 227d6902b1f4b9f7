/**
 * Posts to one channel at Slack's pace (src/slack/pacing.ts), against a fake Slack that limits
 * chat.postMessage per channel as Slack does (about one a second, a short burst tolerated:
 * test/harness/fake-slack-limits.ts). A long answer's parts, and several invocations answering in
 * one channel at once, land whole and in order without one 429; the schedule is one per channel
 * in Postgres, shared by every worker, and a 429 moves it past its Retry-After: a part Slack
 * refused lands no earlier than Slack said, and the answer still lands whole.
 */
import { openDatabase } from '../../src/app/store/db';
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { ChannelPacer, MAX_INLINE_WAIT_MS } from '../../src/slack/pacing';
import { runsClient } from '../harness/runs';
import { appMention, eventEnvelope, linkSlackUser, postSlackEvent, startSlackLoop, type FakeSlack } from '../harness/slack';
import type { TestMember } from '../harness/identity';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
let slack: FakeSlack;

beforeAll(async () => {
  // Edits: the answer's first part in the message, every other part a reply of its own.
  loop = await startSlackLoop({ SLACK_REPLY_MODE: 'edit' });
  ({ stack, slack } = loop);
});
afterAll(() => loop.stop());

/** An answer of `parts` paragraphs, each close to a message's 3,000 characters, so each is a part of its own. */
const answer = (tag: string, parts: number) =>
  Array.from({ length: parts }, (_, i) => `${tag}-${i + 1} ${'word '.repeat(560).trim()}`).join('\n\n');

/** A member's mention in `channel`, its run answered at once with `text`: the invocation's end state. */
async function answered(member: TestMember, slackUserId: string, channel: string, text: string) {
  const mention = appMention(slackUserId, 'a long answer, please', channel);
  const envelope = eventEnvelope(loop.connection, mention);
  expect((await postSlackEvent(stack, loop.connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(loop.connection.connectionId, envelope.event_id));
  const runId = await waitFor(async () => (await handle.query(slackEventStateQuery)).runId ?? undefined, 20_000, { what: 'the run' });
  const runs = runsClient(stack, member.headers);
  await runs.waitForStatus(runId, ['queued'], 20_000);
  expect((await runs.claim(runId)).status).toBe(200);
  for (const [sequence, [type, payload]] of (
    [
      ['assistant', { text }],
      ['terminal', { status: 'succeeded' }],
    ] as const
  ).entries()) {
    expect((await runs.postEvent(runId, { attempt: 1, sequence: sequence + 1, type, payload, createdAt: Date.now() })).status).toBe(200);
  }
  return { state: await handle.result(), mention };
}

/** The thread's texts, oldest first: the first message (its answer part) and its replies. */
const threadTexts = (mention: { channel: string; ts: string }) =>
  slack.messages
    .filter((m) => m.channel === mention.channel && m.thread_ts === mention.ts)
    .sort((a, b) => Number(a.ts) - Number(b.ts))
    .map((m) => m.text);

const postsTo = (channel: string) => slack.calls.filter((c) => c.method === 'chat.postMessage' && c.body.channel === channel);

it("a long answer's parts land whole and in order, about a second apart, without one 429", async () => {
  const member = await loop.org.addMember('member');
  const user = await linkSlackUser(stack, loop.connection, member);
  const { state, mention } = await answered(member, user, 'C0PACED01', answer('part', 8));
  expect(state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  const texts = threadTexts(mention);
  expect(texts).toHaveLength(8);
  texts.forEach((text, i) => expect(text.startsWith(`part-${i + 1} word`)).toBe(true));
  const posts = postsTo('C0PACED01');
  expect(posts.filter((c) => c.status === 429)).toEqual([]);
  // The first message and seven parts; the schedule's second is Postgres's, the fake's its own clock.
  expect(posts).toHaveLength(8);
  // The slots are a second apart on Postgres's clock; a post may leave a little after its slot (a
  // busy worker), so the pace shows over the whole answer: its eight posts span seven slots.
  expect(posts.at(-1)!.at - posts[0]!.at).toBeGreaterThanOrEqual((posts.length - 1) * 900);
}, 120_000);

it('three invocations answering in one channel at once: every answer whole, no 429', async () => {
  const members = await Promise.all([1, 2, 3].map(() => loop.org.addMember('member')));
  const users = await Promise.all(members.map((member) => linkSlackUser(stack, loop.connection, member)));
  const results = await Promise.all(members.map((member, i) => answered(member, users[i]!, 'C0PACED02', answer(`m${i}`, 4))));
  for (const [i, { state, mention }] of results.entries()) {
    expect(state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
    expect(threadTexts(mention).map((text) => text.split(' ')[0])).toEqual([1, 2, 3, 4].map((n) => `m${i}-${n}`));
  }
  expect(postsTo('C0PACED02').filter((c) => c.status === 429)).toEqual([]);
}, 120_000);

it('a 429 on one part, with Retry-After: that part posted again no earlier, the answer whole and in order', async () => {
  const member = await loop.org.addMember('member');
  const user = await linkSlackUser(stack, loop.connection, member);
  const channel = 'C0PACED03';
  const answering = answered(member, user, channel, answer('retry', 4));
  // Once the second part is in, Slack answers the next post (the third part) 429, Retry-After: 3
  // seconds, three times the channel's pace.
  await slack.waitForCall('chat.postMessage', (c) => c.body.channel === channel && String(c.body.text).startsWith('retry-2 '), 60_000);
  slack.script('chat.postMessage', { status: 429, headers: { 'retry-after': '3' }, body: { ok: false, error: 'ratelimited' } });
  const { state, mention } = await answering;
  expect(state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  expect(threadTexts(mention).map((text) => text.split(' ')[0])).toEqual(['retry-1', 'retry-2', 'retry-3', 'retry-4']);
  const posts = postsTo(channel);
  const limited = posts.findIndex((c) => c.status === 429);
  expect(String(posts[limited]?.body.text).split(' ')[0]).toBe('retry-3');
  expect(posts.filter((c) => c.status === 429)).toHaveLength(1);
  // The next post to the channel is that part again, sent no earlier than the Retry-After.
  const next = posts[limited + 1]!;
  expect(String(next.body.text).split(' ')[0]).toBe('retry-3');
  expect(next.at - posts[limited]!.at).toBeGreaterThanOrEqual(3_000);
}, 120_000);

describe('the schedule in Postgres', () => {
  it('is shared by separate processes (pools), one slot per interval, and a 429 holds it past its Retry-After', async () => {
    const other = openDatabase(stack.config.database.url!, { max: 4 });
    try {
      const replicas = [new ChannelPacer(stack.services.database.db, 1_000), new ChannelPacer(other.db, 1_000)];
      const connectionId = loop.connection.connectionId;
      const slots = await Promise.all([0, 1, 2, 3].map((i) => replicas[i % 2]!.reserve(connectionId, 'C0SHARED')));
      expect(slots.every((slot) => slot.reserved)).toBe(true);
      const waits = slots.map((slot) => slot.waitMs).sort((a, b) => a - b);
      // Four slots one interval apart, whichever replica took which (the database's clock moves a little between takes).
      for (let i = 1; i < waits.length; i++) expect(waits[i]! - waits[i - 1]!).toBeGreaterThan(900);
      await replicas[0]!.hold(connectionId, 'C0HELD', 2_500);
      const afterHold = await replicas[1]!.reserve(connectionId, 'C0HELD');
      expect(afterHold).toMatchObject({ reserved: true });
      expect(afterHold.waitMs).toBeGreaterThan(2_000);
      await replicas[1]!.hold(connectionId, 'C0FAR', MAX_INLINE_WAIT_MS + 5_000);
      expect(await replicas[0]!.reserve(connectionId, 'C0FAR')).toMatchObject({ reserved: false });
    } finally {
      await other.close();
    }
  });
});
