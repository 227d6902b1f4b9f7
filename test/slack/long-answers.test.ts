/**
 * A long answer streamed against a fake Slack as strict as Slack (test/harness/fake-slack-limits.ts):
 * a streamed reply closes by itself past an age and stops growing past a size. Scaled down from
 * Slack's (about 5 minutes and 10.6k bytes) to 20 s and 6,000 bytes, with SLACK_STREAM_MAX_AGE
 * and SLACK_STREAM_MAX_BYTES at the same ratio to them as their defaults to Slack's (4 of 5
 * minutes: 16 of 20 s; 9,000 of about 10,600 bytes: 5,100 of 6,000).
 *
 * `den runtime` prints numbered lines for 60 s, about 18,600 characters: the thread holds every
 * line exactly once, in order, across its streamed replies; none is left streaming; the run
 * succeeds. Then Slack closes and refuses replies before the service would stop them, and the
 * service repairs and carries on. Every reply it opens and every repair it makes takes from the
 * workspace's budget (src/slack/budget.ts). Cancel, pressed once the answer is in its second reply,
 * still stops the run, and only the last reply says so.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { CANCEL_ACTION_ID } from '../../src/slack/progress';
import { spawnDen } from '../harness/process';
import {
  appMention,
  blockActions,
  eventEnvelope,
  linkSlackUser,
  postInteraction,
  postSlackEvent,
  startSlackLoop,
  type FakeSlack,
} from '../harness/slack';
import type { FakeMessage, SlackApiCall } from '../harness/fake-slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const SLACK_LIMITS = { streamMaxAgeMs: 20_000, streamMaxBytes: 6_000 };

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
let slack: FakeSlack;
let runtime: ReturnType<typeof spawnDen>;
let slackUserId: string;

beforeAll(async () => {
  loop = await startSlackLoop({ SLACK_STREAM_MAX_AGE: '16s', SLACK_STREAM_MAX_BYTES: '5100' }, { strict: SLACK_LIMITS });
  ({ stack, slack } = loop);
  const member = await loop.org.addMember('member');
  slackUserId = await linkSlackUser(stack, loop.connection, member);
  // The command prints `lines` numbered lines of 62 characters, five a second; the mention's text says how many.
  const script =
    'n=$(cat | tr -dc 0-9); i=1; while [ $i -le $n ]; do printf "line %03d abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz\\n" $i; i=$((i+1)); sleep 0.2; done';
  runtime = spawnDen(['runtime', '--exec', script, '--wait', '2', '--heartbeat-interval', '1', '--grace', '5'], {
    DEN_API_KEY: member.apiKey,
    DEN_API_URL: stack.url,
  });
  await waitFor(() => runtime.output().includes('claiming runs from'), 60_000, { what: 'den runtime to start' });
}, 120_000);

afterAll(async () => {
  runtime?.child.kill('SIGINT');
  await runtime?.exited;
  await loop.stop();
});

const expectedLines = (n: number) =>
  Array.from({ length: n }, (_, i) => `line ${String(i + 1).padStart(3, '0')} abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz`);

/** What a streamed reply shows: what it streamed, or what chat.update gave it once Slack had closed it. */
const shown = (message: FakeMessage) => (message.stream?.repaired ? message.text : message.stream!.markdown);

/**
 * The times the connection's budget rows of `methods` were written (`times`, by method), read
 * every 50 ms until stopped. A call that takes a token (or is refused one) writes the database's
 * time into its method's row just before it is sent (src/slack/budget.ts withBucket); a call sent
 * outside the budget leaves no time of its own there.
 */
function watchBudget(methods: string[]) {
  const times = new Map(methods.map((method) => [method, new Set<number>()]));
  let watching = true;
  const watched = (async () => {
    while (watching) {
      const rows = await stack.services.database.db
        .selectFrom('slack_api_budgets')
        .select(['method', 'refreshed_at'])
        .where('connection_id', '=', loop.connection.connectionId)
        .where('method', 'in', methods)
        .execute();
      for (const row of rows) times.get(row.method)!.add(row.refreshed_at.getTime());
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    times,
    stop: async () => {
      watching = false;
      await watched;
    },
  };
}

/**
 * A mention asking for `lines` lines; its thread once the invocation has ended. `during` acts while
 * it runs. `budgeted(method, which)`: for each call of `which` of the method, whether its row was
 * written after the method's previous call (or the mention) and by the time Slack got the call.
 */
async function answerOf(lines: number, during?: (mention: { channel: string; ts: string }, handle: WorkflowHandle) => Promise<void>) {
  const mention = appMention(slackUserId, `print ${lines} lines`);
  const envelope = eventEnvelope(loop.connection, mention);
  const since = slack.calls.length;
  const startedAt = Date.now();
  const budget = watchBudget(['chat.startStream', 'chat.update']);
  const state = await (async () => {
    expect((await postSlackEvent(stack, loop.connection, envelope)).json).toEqual({ ok: true });
    const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(loop.connection.connectionId, envelope.event_id));
    await during?.(mention, handle);
    return handle.result();
  })().finally(budget.stop);
  const thread = slack.messages.filter((m) => m.channel === mention.channel && m.thread_ts === mention.ts);
  const replies = thread.filter((m) => m.stream).sort((a, b) => Number(a.ts) - Number(b.ts));
  const calls = slack.calls.slice(since).filter((c) => c.body.channel === mention.channel);
  const budgeted = (method: string, which: (call: SlackApiCall) => boolean = () => true) => {
    const ofMethod = calls.filter((c) => c.method === method);
    return ofMethod.flatMap((call, i) => {
      if (!which(call)) return [];
      const after = i === 0 ? startedAt : ofMethod[i - 1]!.at;
      return [[...budget.times.get(method)!].some((at) => at > after && at <= call.at)];
    });
  };
  return { state, first: thread.find((m) => !m.stream)!, replies, calls, budgeted };
}

it('60 s of numbered lines, about 18,600 characters: every line once, in order, across replies stopped before Slack would', async () => {
  const { state, first, replies, calls, budgeted } = await answerOf(300);
  expect(state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  const lines = replies.map(shown).join('').split('\n').filter(Boolean);
  expect(lines).toEqual(expectedLines(300));
  // Stopped by the service before Slack closed or refused any: no repair was needed.
  expect(replies.map((m) => slack.streamState(m))).toEqual(replies.map(() => 'stopped'));
  expect(calls.filter((c) => c.error === 'message_not_in_streaming_state' || c.error === 'msg_too_long')).toEqual([]);
  expect(replies.length).toBeGreaterThanOrEqual(4);
  for (const reply of replies) expect(reply.stream!.bytes).toBeLessThanOrEqual(5_100);
  // The first message kept its Cancel button to the end; then it points to the replies.
  expect(JSON.stringify(calls.find((c) => c.method === 'chat.postMessage' && c.body.text === 'Working on it…')?.body.blocks)).toContain(
    CANCEL_ACTION_ID,
  );
  expect(first.edits.map((e) => e.text)).toEqual(['Done: the answer is in the replies below.']);
  // Every reply opened (the first and each next one) took from the workspace budget, which kept every call under Slack's limits.
  expect(budgeted('chat.startStream')).toEqual(replies.map(() => true));
  expect(calls.filter((c) => c.status === 429)).toEqual([]);
}, 240_000);

it('Slack closing a reply before the service would: the stuck reply repaired with its own text, the answer carried on in the next', async () => {
  // Slack now closes a reply after 7 s, well before the service's 16 s.
  slack.configure({ strict: { streamMaxAgeMs: 7_000 } });
  try {
    const { state, replies, calls, budgeted } = await answerOf(120);
    expect(state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
    expect(replies.map(shown).join('').split('\n').filter(Boolean)).toEqual(expectedLines(120));
    expect(replies.map((m) => slack.streamState(m)).filter((s) => s !== 'stopped' && s !== 'repaired')).toEqual([]);
    // Each reply opened, and each repair, took from the workspace budget.
    expect(budgeted('chat.startStream')).toEqual(replies.map(() => true));
    const closed = new Set(calls.filter((c) => c.error === 'message_not_in_streaming_state').map((c) => c.body.ts));
    expect(closed.size).toBeGreaterThanOrEqual(1);
    // Each reply Slack closed got its text back from chat.update, once.
    const repairs = calls.filter((c) => c.method === 'chat.update' && typeof c.body.markdown_text === 'string');
    expect(repairs.map((c) => c.body.ts).sort()).toEqual([...closed].sort());
    expect(budgeted('chat.update', (c) => typeof c.body.markdown_text === 'string')).toEqual(repairs.map(() => true));
    for (const ts of closed) expect(slack.streamState(replies.find((m) => m.ts === ts)!)).toBe('repaired');
  } finally {
    slack.configure({ strict: SLACK_LIMITS });
  }
}, 180_000);

it('Slack refusing to grow a reply before the service would stop it: the reply stopped, the answer carried on in the next', async () => {
  // Slack now stops a reply growing at 1,500 bytes, well before the service's 5,100.
  slack.configure({ strict: { streamMaxBytes: 1_500 } });
  try {
    const { state, replies, calls } = await answerOf(120);
    expect(state).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
    expect(replies.map(shown).join('').split('\n').filter(Boolean)).toEqual(expectedLines(120));
    expect(replies.map((m) => slack.streamState(m))).toEqual(replies.map(() => 'stopped'));
    expect(calls.some((c) => c.error === 'msg_too_long')).toBe(true);
    for (const reply of replies) expect(reply.stream!.bytes).toBeLessThanOrEqual(1_500);
  } finally {
    slack.configure({ strict: SLACK_LIMITS });
  }
}, 180_000);

it('Cancel pressed once the answer is in its second reply: the run ends cancelled, every line once, only the last reply says so', async () => {
  // Slack now stops a reply growing at 1,500 bytes (about 23 lines), so the second reply opens within seconds.
  slack.configure({ strict: { streamMaxBytes: 1_500 } });
  try {
    const { state, first, replies } = await answerOf(300, async (mention, handle) => {
      const runId = await waitFor(async () => (await handle.query(slackEventStateQuery)).runId ?? undefined, 30_000, { what: 'the run' });
      const inThread = () => slack.messages.filter((m) => m.channel === mention.channel && m.thread_ts === mention.ts);
      await waitFor(() => inThread().filter((m) => m.stream).length >= 2, 60_000, { what: 'the second streamed reply' });
      // The first message still shows its Cancel button, and pressing it reaches the run.
      expect(JSON.stringify(inThread().find((m) => !m.stream)!.blocks)).toContain(CANCEL_ACTION_ID);
      const click = blockActions(loop.connection, {
        user: slackUserId,
        actionId: CANCEL_ACTION_ID,
        value: runId,
        channel: mention.channel,
        threadTs: mention.ts,
      });
      expect((await postInteraction(stack, loop.connection, click)).status).toBe(200);
    });
    expect(state).toMatchObject({ status: 'cancelled', runStatus: 'cancelled' });
    expect(replies.length).toBeGreaterThanOrEqual(2);
    expect(replies.map((m) => slack.streamState(m))).toEqual(replies.map(() => 'stopped'));
    const texts = replies.map(shown);
    const cancelled = /The run was cancelled/;
    expect(texts.map((text) => cancelled.test(text))).toEqual(texts.map((_, i) => i === texts.length - 1));
    const lines = texts.join('').split('\n').filter(Boolean);
    expect(lines.at(-1)).toMatch(/^The run was cancelled/);
    // The lines printed before the cancel, each once and in order, across the replies.
    const printed = lines.slice(0, -1);
    expect(printed.length).toBeGreaterThan(shown(replies[0]!).split('\n').filter(Boolean).length);
    expect(printed).toEqual(expectedLines(printed.length));
    // The first message says how the run ended; its Cancel button is gone.
    expect(first.text).toMatch(cancelled);
    expect(JSON.stringify(first.blocks)).not.toContain(CANCEL_ACTION_ID);
  } finally {
    slack.configure({ strict: SLACK_LIMITS });
  }
}, 180_000);
