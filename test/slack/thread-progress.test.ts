/**
 * What a member sees in Slack with a real runtime, end to end: `den runtime --exec` runs as a
 * child process against the real stack, and the (local, fake) Slack Web API records every call.
 * A mention gets one message in its thread at once, the command's output grows in it (chat.update,
 * no closer together than SLACK_PROGRESS_INTERVAL) and the whole output replaces it; the Cancel
 * button, clicked by the run's member, reaches the runtime's next heartbeat, which stops the
 * command, and the message says the run was cancelled. Anyone else's click is refused.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { slackEventWorkflowId } from '../../src/slack/contract';
import { CANCEL_ACTION_ID } from '../../src/slack/progress';
import type { TestMember } from '../harness/identity';
import { gone, spawnDen } from '../harness/process';
import { runResult } from '../harness/runs';
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
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const INTERVAL_MS = 1000;
const HEARTBEAT_MS = 1000;
const KILL_GRACE_MS = 3000;

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
let slack: FakeSlack;
let dir: string;

beforeAll(async () => {
  loop = await startSlackLoop({ SLACK_PROGRESS_INTERVAL: `${INTERVAL_MS}ms`, SLACK_REPLY_MODE: 'edit' });
  ({ stack, slack } = loop);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-thread-progress-'));
});
afterAll(async () => {
  await loop.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** `den runtime --exec` as the member's own runtime would run it, a real child process. */
function startRuntime(member: TestMember, exec: string) {
  const proc = spawnDen(['runtime', '--exec', exec, '--wait', '2', '--heartbeat-interval', String(HEARTBEAT_MS / 1000), '--grace', '5'], {
    DEN_API_KEY: member.apiKey,
    DEN_API_URL: stack.url,
    DEN_RUNTIME_KILL_GRACE: `${KILL_GRACE_MS}ms`,
  });
  return {
    output: proc.output,
    /** Resolves once it polls for runs (tsx compiles the CLI first, which a loaded machine makes slow). */
    ready: () => waitFor(() => proc.output().includes('claiming runs from'), 60_000, { what: 'den runtime to start' }),
    /** Ctrl-C; the exit, with the runtime's output when it did not exit 0 (so a failure shows why). */
    async stop() {
      proc.child.kill('SIGINT');
      const { code, signal } = await proc.exited;
      return code === 0 ? 0 : { code, signal, output: proc.output() };
    },
  };
}

/** A linked member's mention; `sentAt` is taken before the event is delivered. */
async function mentionFrom(slackUserId: string, text: string) {
  const mention = appMention(slackUserId, text);
  const envelope = eventEnvelope(loop.connection, mention);
  const sentAt = Date.now();
  expect((await postSlackEvent(stack, loop.connection, envelope)).json).toEqual({ ok: true });
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(loop.connection.connectionId, envelope.event_id));
  return { mention, handle, sentAt };
}

const postsFor = (mention: { channel: string; ts: string }) =>
  slack.calls.filter((c) => c.method === 'chat.postMessage' && c.body.channel === mention.channel && c.body.thread_ts === mention.ts);
const updatesOf = (message: { channel: string; ts: string }) =>
  slack.calls.filter((c) => c.method === 'chat.update' && c.body.channel === message.channel && c.body.ts === message.ts);
const threadOf = (mention: { channel: string; ts: string }) =>
  slack.messages.filter((m) => m.channel === mention.channel && m.thread_ts === mention.ts);

it('one message in the thread at once, the output growing in it no faster than the interval, the whole output last', async () => {
  const member = await loop.org.addMember('member');
  const slackUserId = await linkSlackUser(stack, loop.connection, member);
  const runtime = startRuntime(member, 'echo one; sleep 1; echo two; sleep 1; echo three');
  let exit;
  try {
    await runtime.ready();
    const { mention, handle, sentAt } = await mentionFrom(slackUserId, 'count to three');
    const posted = await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts, 10_000);
    expect(posted.at - sentAt).toBeLessThan(2000);
    expect(posted.body).toMatchObject({ channel: mention.channel, thread_ts: mention.ts, text: 'Working on it…' });

    expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
    const [message, ...others] = threadOf(mention);
    expect(others).toEqual([]);
    // No second post for the invocation: not in the thread, and not anywhere under its reply key.
    expect(postsFor(mention)).toEqual([posted]);
    expect(
      slack.calls.filter(
        (c) => c.method === 'chat.postMessage' && JSON.stringify(c.body.metadata) === JSON.stringify(posted.body.metadata),
      ),
    ).toEqual([posted]);

    const updates = updatesOf(message!);
    expect(updates.length).toBeGreaterThanOrEqual(2);
    const texts = updates.map((c) => String(c.body.text).trimEnd());
    for (const [index, update] of updates.entries()) {
      // The post counts as the first edit; a workflow timer may fire a few ms early on its clock.
      const before = index === 0 ? posted.at : updates[index - 1]!.at;
      expect(update.at - before).toBeGreaterThanOrEqual(INTERVAL_MS - 50);
      // Growing: each text carries on the one before.
      if (index > 0) expect(texts[index]!.startsWith(texts[index - 1]!)).toBe(true);
    }
    expect(texts[0]!.length).toBeLessThan(texts.at(-1)!.length);
    // The command's output, `one\ntwo\nthree\n`, as mrkdwn: the same lines, the trailing newline gone.
    expect(message!.text).toBe('one\ntwo\nthree');
    expect(updates.at(-1)!.body.text).toBe('one\ntwo\nthree');
    expect(JSON.stringify(message!.blocks)).not.toContain(CANCEL_ACTION_ID);
  } finally {
    exit = await runtime.stop();
  }
  expect(exit).toBe(0);
}, 90_000);

it('the Cancel button: refused for another user; the member’s click stops the command and the message says so', async () => {
  const owner = await loop.org.addMember('member');
  const ownerSlack = await linkSlackUser(stack, loop.connection, owner);
  const strangerSlack = await linkSlackUser(stack, loop.connection, await loop.org.addMember('member'));
  const pidFile = path.join(dir, 'cancel.pids');
  // The shell and a child of its own: the stop must reach the whole process group.
  const runtime = startRuntime(owner, `sleep 60 & echo "$$ $!" > ${pidFile}; echo started; wait`);
  let exit;
  try {
    await runtime.ready();
    const { mention, handle } = await mentionFrom(ownerSlack, 'take a minute');
    const posted = await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts, 10_000);
    // The button's value is what Slack sends back on a click: the run id.
    const button = (posted.body.blocks as { type: string; elements?: { action_id: string; value: string }[] }[])
      .flatMap((b) => b.elements ?? [])
      .find((e) => e.action_id === CANCEL_ACTION_ID);
    const runId = button!.value;
    const pids = (await waitFor(() => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').trim(), 30_000, { what: 'the command' }))
      .split(' ')
      .map(Number);
    expect(pids).toHaveLength(2);
    expect(pids.map(gone)).toEqual([false, false]);
    const runOf = async () => (await stack.request('GET', `/v1/automation-runs/${runId}`, { headers: owner.headers })).json;
    await waitFor(async () => (await runOf()).status === 'running', 15_000, { what: 'the run to be running' });
    const click = (user: string) =>
      postInteraction(
        stack,
        loop.connection,
        blockActions(loop.connection, { user, actionId: CANCEL_ACTION_ID, value: runId, channel: mention.channel, threadTs: mention.ts }),
      );
    const ephemeralTo = (user: string, after: number) =>
      slack.waitForCall('chat.postEphemeral', (c) => c.body.user === user && c.at >= after, 10_000);

    // Another member's click: refused to them alone, and nothing changes.
    const strangerAt = Date.now();
    expect((await click(strangerSlack)).status).toBe(200);
    const refusal = await ephemeralTo(strangerSlack, strangerAt);
    expect(refusal.body).toMatchObject({ channel: mention.channel, user: strangerSlack, thread_ts: mention.ts });
    expect(refusal.body.text).toMatch(/Only the member who asked, or an admin/);
    // Two heartbeats later: still running, no cancel asked, the command alive, the message unchanged.
    await new Promise((resolve) => setTimeout(resolve, 2 * HEARTBEAT_MS + 500));
    expect(await runOf()).toMatchObject({ status: 'running', cancelRequested: null });
    expect(runtime.output()).not.toContain('cancel requested');
    expect(pids.map(gone)).toEqual([false, false]);
    expect(threadOf(mention).map((m) => m.text)).not.toContainEqual(expect.stringMatching(/cancel/i));

    // The member's click: the next heartbeat's reply says cancelRequested, and the runtime stops the command.
    const ownerAt = Date.now();
    expect((await click(ownerSlack)).status).toBe(200);
    const clickedAt = Date.now();
    expect((await ephemeralTo(ownerSlack, ownerAt)).body.text).toMatch(/Cancelling the run/);
    await waitFor(() => runtime.output().includes(`run ${runId}: cancel requested`), 20_000, {
      what: 'the heartbeat to say cancelRequested',
    });
    const heardAt = Date.now();
    // The next heartbeat (one interval, plus a loaded machine's slack), not the end of the
    // coalescing window (a quarter of the 60 s lease) the API otherwise answers heartbeats from.
    expect(heardAt - clickedAt).toBeLessThan(HEARTBEAT_MS + 4_000);
    await waitFor(() => pids.every(gone), KILL_GRACE_MS + 2_000, { what: 'the command to be gone' });
    expect(Date.now() - heardAt).toBeLessThan(KILL_GRACE_MS);

    expect(await handle.result()).toMatchObject({ runStatus: 'cancelled' });
    expect(await runResult(stack, loop.org.organizationId, runId)).toMatchObject({ status: 'cancelled' });
    expect(await runOf()).toMatchObject({ status: 'cancelled' });
    const thread = threadOf(mention);
    expect(thread).toHaveLength(1);
    expect(thread[0]!.text).toMatch(/^The run was cancelled/);
    expect(JSON.stringify(thread[0]!.blocks)).not.toContain(CANCEL_ACTION_ID);
    expect(postsFor(mention)).toEqual([posted]);
  } finally {
    exit = await runtime.stop();
  }
  expect(exit).toBe(0);
}, 120_000);
