/**
 * What a member is told about their runtime, over the real stack with `den runtime` as a child
 * process: a mention with no runtime of theirs online is answered in its thread at once with how to
 * start one and how long the request waits, and that message becomes the usual progress once a
 * runtime claims the run; a runtime that keeps crashing pauses its member's mentions (each told so,
 * privately), and the half-open probe lifts the pause once the runtime is fixed. Other members
 * never notice.
 *
 * RUNNER_BREAKER_WINDOW is 30 s here, set by this test: the breaker counts failures within the
 * window and stays open for one, so the default (5 min) would make the test wait five minutes for
 * its probe. Thirty seconds still leaves room for five crashing runs on a busy machine.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WORKING_TEXT } from '../../src/slack/progress';
import type { TestMember } from '../harness/identity';
import { startScriptRuntime, stopRuntimes, type Spawned } from '../harness/process';
import { eventEnvelope, linkSlackUser, newTs, postSlackEvent, startSlackLoop } from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-gate-'));

beforeAll(async () => {
  loop = await startSlackLoop({ RUNNER_BREAKER_WINDOW: '30s', SLACK_PROGRESS_INTERVAL: '200ms' });
  stack = loop.stack;
});
afterAll(async () => {
  await loop.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function mention(slackUserId: string, text: string) {
  const ts = newTs();
  const event = {
    type: 'app_mention',
    user: slackUserId,
    text: `<@${loop.connection.botUserId}> ${text}`,
    ts,
    channel: 'C0GATE',
    event_ts: ts,
  };
  const res = await postSlackEvent(stack, loop.connection, eventEnvelope(loop.connection, event));
  expect(res.json).toEqual({ ok: true });
  return { ts, sentAt: Date.now() };
}

const runtimeOf = (member: TestMember, name: string, text: string, spawned: Spawned[]) =>
  startScriptRuntime({ url: stack.url, apiKey: member.apiKey }, { dir, name, text }, spawned);
const firstMessage = (ts: string) => loop.slack.messages.find((m) => m.thread_ts === ts && m.metadata !== undefined);
const runsOf = async (member: TestMember) => (await stack.request('GET', '/v1/automation-runs', { headers: member.headers })).json.runs;

it('no runtime online: the thread says so within 10 s (how to start one, how long it waits); a runtime that claims it turns that message into progress', async () => {
  const member = await loop.org.addMember('member');
  const user = await linkSlackUser(stack, loop.connection, member);
  const { ts, sentAt } = await mention(user, 'warm the cache');
  const notice = await waitFor(() => firstMessage(ts), 10_000, { what: 'the notice in the thread' });
  expect(notice.postedAt - sentAt).toBeLessThan(10_000);
  expect(notice.text).toContain('No den runtime of yours is running');
  expect(notice.text).toContain('npx den runtime');
  expect(notice.text).toContain('waits 10 minutes');

  const spawned: Spawned[] = [];
  try {
    await runtimeOf(member, 'late', 'sleep 1; printf "warm: %s" "$(cat)"', spawned);
    // The same message: "Working on it…" once claimed, then the answer below it.
    await waitFor(() => notice.edits.some((e) => e.text === WORKING_TEXT), 30_000, { what: 'the notice to become progress' });
    await waitFor(() => loop.slack.messages.find((m) => m.thread_ts === ts && m.text.includes('warm: warm the cache')), 30_000);
    expect(loop.slack.messages.filter((m) => m.thread_ts === ts && m.metadata !== undefined)).toHaveLength(1);

    // With a runtime online, nothing changes: "Working on it…" from the start.
    const online = await mention(user, 'and again');
    expect((await waitFor(() => firstMessage(online.ts), 10_000)).text).toBe(WORKING_TEXT);
  } finally {
    await stopRuntimes(spawned);
  }
}, 150_000);

it('five runs whose command crashes pause the sixth mention with a notice; after the window, the probe lifts it once fixed; others are not affected', async () => {
  const member = await loop.org.addMember('member');
  const user = await linkSlackUser(stack, loop.connection, member);
  const colleague = await loop.org.addMember('member');
  const colleagueUser = await linkSlackUser(stack, loop.connection, colleague);
  const spawned: Spawned[] = [];
  try {
    await runtimeOf(member, 'crashing', 'echo "segfault in the agent" >&2; exit 3', spawned);
    for (let i = 1; i <= 5; i++) {
      const { ts } = await mention(user, `crash ${i}`);
      await waitFor(() => loop.slack.messages.find((m) => m.thread_ts === ts && m.text.includes('segfault in the agent')), 30_000, {
        what: `crash ${i} answered`,
      });
    }
    await stopRuntimes(spawned.splice(0));

    const paused = await mention(user, 'a sixth try');
    const notice = await loop.slack.waitForCall(
      'chat.postEphemeral',
      (c) => c.body.user === user && c.body.thread_ts === paused.ts,
      15_000,
    );
    expect(notice.body.text).toContain('paused your requests');
    expect(notice.body.text).toContain('segfault in the agent');
    expect(notice.body.text).toMatch(/lifts in \d+ seconds/);
    expect(await runsOf(member)).toHaveLength(5);
    expect(firstMessage(paused.ts)).toBeUndefined();

    // Another member is not affected.
    await runtimeOf(colleague, 'colleague', 'printf "fine: %s" "$(cat)"', spawned);
    const theirs = await mention(colleagueUser, 'all good here?');
    await waitFor(() => loop.slack.messages.find((m) => m.thread_ts === theirs.ts && m.text.includes('fine: all good here?')), 30_000);

    // Fixed; once the window is over the next mention runs as the probe, and its success closes the breaker.
    await runtimeOf(member, 'fixed', 'printf "fixed: %s" "$(cat)"', spawned);
    const runners = await stack.request('GET', '/v1/automation-runners', { headers: member.headers });
    const pausedUntil = runners.json.runners.find((r: { paused: boolean }) => r.paused)?.pausedUntil as number;
    expect(pausedUntil).toBeGreaterThan(Date.now());
    await new Promise((resolve) => setTimeout(resolve, pausedUntil - Date.now() + 500));
    const probe = await mention(user, 'probe');
    await waitFor(() => loop.slack.messages.find((m) => m.thread_ts === probe.ts && m.text.includes('fixed: probe')), 30_000);
    const after = await mention(user, 'back to work');
    await waitFor(() => loop.slack.messages.find((m) => m.thread_ts === after.ts && m.text.includes('fixed: back to work')), 30_000);
    expect(await runsOf(member)).toHaveLength(7);
  } finally {
    await stopRuntimes(spawned);
  }
}, 240_000);
