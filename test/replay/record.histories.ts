/**
 * Records real histories of every workflow type into test/histories/, for the replay test
 * (test/replay/replay.test.ts). Not part of `npm test`: run `npm run record:histories` after a
 * deliberate, versioned change to a workflow (see docs/architecture.md, "Changing a workflow"),
 * and commit the new files beside the old ones: old histories must keep replaying.
 *
 * Each scenario drives the real service over HTTP with the real worker, exactly as in the
 * feature tests, then saves the workflow's history as Temporal's own JSON.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { temporal } from '@temporalio/proto';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createGithubActivities } from '../../activities/github';
import { githubDeliveryWorkflowId, githubReconcileScheduleId, githubTargetWorkflowId } from '../../src/github/contract';
import { getTarget, recordResync } from '../../src/github/target-records';
import { runHeartbeatSignal, runWorkflowId } from '../../src/runs/contract';
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { deliver, freshId, githubExample, ownedTarget } from '../harness/github';
import { startFakeGithub } from '../harness/fake-github';
import { STRICT_DEFAULTS } from '../harness/fake-slack-limits';
import { fakeGithubEnv, redeliverInto, syncedRepo } from '../harness/github-sync';
import { createTestOrg } from '../harness/identity';
import { closedPort } from '../harness/ports';
import { event, newRunId, runResult, runsClient, startQueuedRun } from '../harness/runs';
import {
  appHomeOpened,
  appMention,
  channelMessage,
  createTestSlackConnection,
  directMessage,
  eventEnvelope,
  invocationWorkflowId,
  linkTokenFrom,
  markRuntimeOnline,
  newSlackUserId,
  newTs,
  postSlackEvent,
  postSlashCommand,
  startFakeSlack,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const OUT = path.resolve(__dirname, '../histories');
const SECRET = 'replay-recording-secret';

/** Saved as the proto's plain-object form (64-bit numbers and enums as strings), read back with fromObject. */
async function save(name: string, handle: WorkflowHandle, runId?: string): Promise<void> {
  const history = await (runId ? stack.services.temporal.client.workflow.getHandle(handle.workflowId, runId) : handle).fetchHistory();
  const plain = temporal.api.history.v1.History.toObject(temporal.api.history.v1.History.fromObject(history), {
    longs: String,
    enums: String,
    bytes: String,
  });
  await fs.writeFile(path.join(OUT, `${name}.json`), `${JSON.stringify(plain)}\n`);
}

let stack: TestStack;
let slack: Awaited<ReturnType<typeof startFakeSlack>>;
let github: Awaited<ReturnType<typeof startFakeGithub>>;
beforeAll(async () => {
  await fs.mkdir(OUT, { recursive: true });
  slack = await startFakeSlack();
  github = await startFakeGithub();
  stack = await startTestStack({
    worker: true,
    env: {
      ...fakeGithubEnv(github, SECRET),
      SLACK_API_BASE_URL: slack.url,
      RUN_CONTINUE_AS_NEW_EVENTS: '12',
      SLACK_PROGRESS_INTERVAL: '1000',
      // Above the progress recording's history, below the continue-as-new recording's.
      SLACK_CONTINUE_AS_NEW_EVENTS: '150',
      // The least a streamed reply may hold, so a short recording cuts an answer in several; the
      // other recordings stream less than this.
      SLACK_STREAM_MAX_BYTES: '1000',
      GITHUB_TARGET_IDLE: '2s',
      // One runtime failure pauses a member: the paused recording needs one failed run, not five.
      RUNNER_BREAKER_FAILURES: '1',
    },
  });
});
afterAll(async () => {
  await stack.stop();
  await slack.close();
  await github.close();
});

it("records a member's run that another member's heartbeat reaches but does not move", async () => {
  const org = await createTestOrg(stack.services.database.db);
  const [alice, bob] = [await org.addMember('member'), await org.addMember('member')];
  const runs = runsClient(stack, alice.headers);
  const id = newRunId();
  expect((await runs.postEvent(id, event(1, 1, 'user', { text: 'mine' }))).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, id));
  // As a heartbeat that raced the run's start would: the run ignores it.
  await handle.signal(runHeartbeatSignal, { attempt: 1, receivedAt: Date.now() }, { memberId: bob.memberId, admin: false });
  expect((await runsClient(stack, bob.headers).postEvent(id, event(1, 2))).status).toBe(404);
  expect((await runs.heartbeat(id, 1)).status).toBe(200);
  expect((await runs.postEvent(id, event(1, 2, 'terminal'))).status).toBe(200);
  expect((await runResult(stack, org.organizationId, id)).status).toBe('succeeded');
  await save('runs-other-member-heartbeat', handle);
});

it('records a run with events, out of order, to its terminal', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const id = newRunId();
  for (const [sequence, type] of [
    [1, 'user'],
    [3, 'usage'],
    [2, 'assistant'],
    [4, 'terminal'],
  ] as const) {
    expect(
      (await runs.postEvent(id, event(1, sequence, type, type === 'usage' ? { inputTokens: 3 } : { text: `e${sequence}` }))).status,
    ).toBe(200);
  }
  expect((await runResult(stack, org.organizationId, id)).status).toBe('succeeded');
  await save('runs-events', stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, id)));
});

it('records a claimed run its runtime completes behind an out-of-order event, the completion repeated', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const { runId, handle } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: org.owner.memberId });
  expect((await runs.claim(runId)).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 2, 'assistant', { text: 'done' }))).status).toBe(200);
  const complete = (body: unknown) => stack.request('POST', `/v1/automation-runs/${runId}/complete`, { headers: org.owner.headers, body });
  expect((await complete({ attempt: 1, status: 'succeeded', result: { ok: 1 } })).json.status).toBe('running');
  expect((await complete({ attempt: 1, status: 'succeeded' })).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 1, 'user'))).status).toBe(200);
  expect((await runResult(stack, org.organizationId, runId)).status).toBe('succeeded');
  await save('runs-complete', handle);
});

it('records a claimed run that loses its lease, is claimed again, and succeeds', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const { runId, handle } = await startQueuedRun(stack, {
    organizationId: org.organizationId,
    memberId: org.owner.memberId,
    settings: { leaseTimeoutMs: 1_500 },
  });
  expect((await runs.claim(runId)).status).toBe(200);
  await runs.waitForStatus(runId, ['awaiting_retry'], 15_000);
  expect((await runs.claim(runId)).json.attempt).toBe(2);
  expect((await runs.postEvent(runId, event(2, 1, 'terminal'))).status).toBe(200);
  await handle.result();
  await save('runs-lease-retry', handle);
});

it('records a run that continues as new (both executions)', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const id = newRunId();
  for (let sequence = 1; sequence <= 30; sequence++) expect((await runs.postEvent(id, event(1, sequence))).status).toBe(200);
  expect((await runs.postEvent(id, event(1, 31, 'terminal'))).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, id));
  expect((await runResult(stack, org.organizationId, id)).status).toBe('succeeded');
  const first = (await handle.describe()).raw.workflowExecutionInfo?.firstRunId ?? undefined;
  await save('runs-continue-as-new-first', handle, first);
  await save('runs-continue-as-new-last', handle);
});

it('records a cancelled run', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const { handle } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: org.owner.memberId });
  await handle.cancel();
  await handle.result();
  await save('runs-cancelled', handle);
});

it("records a member's cancel of a queued run, of a claimed run that ends at its terminal, and of one whose lease runs out", async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const owner = { organizationId: org.organizationId, memberId: org.owner.memberId };
  const cancel = (runId: string, body: unknown) =>
    stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/cancel`, { headers: org.owner.headers, body });
  const queued = await startQueuedRun(stack, owner);
  const claimed = await startQueuedRun(stack, owner);
  const quiet = await startQueuedRun(stack, { ...owner, settings: { leaseTimeoutMs: 1_500 } });
  expect((await cancel(queued.runId, { reason: 'not needed' })).status).toBe(202);
  expect((await runs.claim(claimed.runId)).status).toBe(200);
  expect((await runs.claim(quiet.runId)).status).toBe(200);
  expect((await cancel(claimed.runId, {})).json).toEqual({ status: 'running', cancelRequested: true });
  expect((await cancel(quiet.runId, {})).status).toBe(202);
  expect((await runs.heartbeat(claimed.runId, 1)).json.cancelRequested).toBe(true);
  expect((await runs.postEvent(claimed.runId, event(1, 1, 'assistant', { text: 'partial' }))).status).toBe(200);
  expect((await runs.postEvent(claimed.runId, event(1, 2, 'terminal', { status: 'cancelled' }))).status).toBe(200);
  for (const { runId } of [queued, claimed, quiet]) expect((await runResult(stack, org.organizationId, runId)).status).toBe('cancelled');
  await save('runs-cancel-queued', queued.handle);
  await save('runs-cancel-claimed', claimed.handle);
  await save('runs-cancel-lease-out', quiet.handle);
});

it('records runs that end failed (lease lost on the last attempt), timed_out and skipped', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const owner = { organizationId: org.organizationId, memberId: org.owner.memberId };
  const lost = await startQueuedRun(stack, { ...owner, settings: { leaseTimeoutMs: 1_000, maxAttempts: 1 } });
  const long = await startQueuedRun(stack, { ...owner, settings: { maxDurationMs: 2_000 } });
  const unclaimed = await startQueuedRun(stack, { ...owner, settings: { claimDeadlineMs: 3_000 } });
  expect((await runs.claim(lost.runId)).status).toBe(200);
  expect((await runs.claim(long.runId)).status).toBe(200);
  expect(await runResult(stack, org.organizationId, lost.runId)).toMatchObject({ status: 'failed', error: 'lease_lost' });
  expect(await runResult(stack, org.organizationId, long.runId)).toMatchObject({ status: 'timed_out', error: 'max_duration_exceeded' });
  expect(await runResult(stack, org.organizationId, unclaimed.runId)).toMatchObject({ status: 'skipped', error: 'runner_unavailable' });
  await save('runs-lease-lost', lost.handle);
  await save('runs-timed-out', long.handle);
  await save('runs-skipped', unclaimed.handle);
});

/** The Slack user links their account through the slash command's link, as a member would. */
async function linkSlackUser(
  connection: Awaited<ReturnType<typeof createTestSlackConnection>>,
  headers: Record<string, string>,
  slackUserId: string,
) {
  const command = await postSlashCommand(stack, connection, { user_id: slackUserId });
  const linked = await stack.request('POST', `/v1/integrations/slack/${connection.connectionId}/account-links`, {
    headers,
    body: { token: linkTokenFrom(command.json.text) },
  });
  expect(linked.status).toBe(201);
}

/** Waits for the Slack event to route its run, then claims it as the member's runtime. */
async function claimRoutedRun(
  handle: ReturnType<typeof stack.services.temporal.client.workflow.getHandle>,
  headers: Record<string, string>,
) {
  const state = await waitFor(async () => {
    const s = await handle.query(slackEventStateQuery);
    return s.status === 'run_created' ? s : undefined;
  });
  const runs = runsClient(stack, headers);
  await waitFor(async () => (await runs.list('?status=queued')).json.runs.length === 1);
  expect((await runs.claim(state.runId!)).status).toBe(200);
  return { runs, runId: state.runId! };
}

it('records a Slack event whose run its runtime reports failed', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  const slackUserId = newSlackUserId();
  await linkSlackUser(connection, member.headers, slackUserId);
  const envelope = eventEnvelope(connection, appMention(slackUserId, 'fail me'));
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  const { runs, runId } = await claimRoutedRun(handle, member.headers);
  expect((await runs.postEvent(runId, event(1, 1, 'terminal', { status: 'failed', error: 'tool_crashed' }))).status).toBe(200);
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'failed' });
  await save('slack-event-run-failed', handle);
  await save('slack-event-child-run-failed', stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId)));
});

it('records a Slack event that waits for a link, then routes a run and replies', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  const slackUserId = newSlackUserId();
  const envelope = eventEnvelope(connection, appMention(slackUserId, 'record me'));
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  await waitFor(async () => (await handle.query(slackEventStateQuery)).status === 'awaiting_link');
  await linkSlackUser(connection, member.headers, slackUserId);
  const { runs, runId } = await claimRoutedRun(handle, member.headers);
  expect((await runs.postEvent(runId, event(1, 1, 'assistant', { text: 'recorded' }))).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 2, 'terminal'))).status).toBe(200);
  expect(await handle.result()).toMatchObject({ status: 'replied' });
  await save('slack-event-link-and-run', handle);
  await save('slack-event-child-run', stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId)));
});

it('records a Slack event whose message follows the run: progress edits, a 429, the answer in place', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  const slackUserId = newSlackUserId();
  await linkSlackUser(connection, member.headers, slackUserId);
  // The member's runtime is there: the first message is "Working on it…" (the other recordings ask with none).
  await markRuntimeOnline(stack, member);
  const mention = appMention(slackUserId, 'watch me');
  const envelope = eventEnvelope(connection, mention);
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  const { runs, runId } = await claimRoutedRun(handle, member.headers);
  await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
  slack.script('chat.update', { status: 429, headers: { 'retry-after': '1' }, body: { ok: false, error: 'ratelimited' } });
  const reports: [string, Record<string, unknown>][] = [
    ['assistant', { text: 'one' }],
    ['capability_execution', { tool: 'search' }],
    ['assistant', { text: 'one two' }],
  ];
  for (const [index, [type, payload]] of reports.entries()) {
    expect((await runs.postEvent(runId, event(1, index + 1, type as 'assistant', payload))).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1200));
  }
  expect((await runs.postEvent(runId, event(1, reports.length + 1, 'terminal'))).status).toBe(200);
  expect(await handle.result()).toMatchObject({ status: 'replied' });
  await save('slack-event-progress', handle);
  await save('slack-event-child-run-progress', stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId)));
});

it('records a Slack event that continues as new while it follows its run (slack-continue-as-new, run-tells-end)', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  const slackUserId = newSlackUserId();
  await linkSlackUser(connection, member.headers, slackUserId);
  const mention = appMention(slackUserId, 'a long one');
  const envelope = eventEnvelope(connection, mention);
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  const first = (await handle.describe()).runId;
  const { runs, runId } = await claimRoutedRun(handle, member.headers);
  await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === mention.ts);
  let sequence = 0;
  // A progress edit each interval until the invocation has continued as new, then a few more.
  for (let after = 0; after < 3;) {
    sequence += 1;
    expect((await runs.postEvent(runId, event(1, sequence, 'assistant', { text: `line ${sequence}` }))).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    if ((await handle.describe()).runId !== first) after += 1;
    expect(sequence).toBeLessThan(60);
  }
  expect((await runs.postEvent(runId, event(1, sequence + 1, 'terminal'))).status).toBe(200);
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  await save('slack-event-continue-as-new-first', handle, first);
  await save('slack-event-continue-as-new-last', handle);
  await save(
    'slack-event-child-run-tells-end',
    stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId)),
  );
});

it('records a Slack event whose answer streams in segments: one stopped at its size, one Slack closed and repaired (slack-stream-segments)', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  const slackUserId = newSlackUserId();
  await linkSlackUser(connection, member.headers, slackUserId);
  const mention = appMention(slackUserId, 'a long answer');
  const envelope = eventEnvelope(connection, mention);
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  const { runs, runId } = await claimRoutedRun(handle, member.headers);
  // Slack closes a streamed reply 6 s after it opened, long before the service's SLACK_STREAM_MAX_AGE.
  slack.configure({ strict: { streamMaxAgeMs: 6_000 } });
  try {
    const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i + 1}`).join(' ');
    // 700 bytes, then 1,500: the first reply is stopped near SLACK_STREAM_MAX_BYTES and the next takes the rest.
    expect((await runs.postEvent(runId, event(1, 1, 'assistant', { text: words(100) }))).status).toBe(200);
    await slack.waitForCall(
      'chat.appendStream',
      (c) => c.body.channel === mention.channel && String(c.body.markdown_text ?? '').includes('word100'),
    );
    expect((await runs.postEvent(runId, event(1, 2, 'assistant', { text: words(200) }))).status).toBe(200);
    await slack.waitForCall('chat.appendStream', (c) => String(c.body.markdown_text ?? '').includes('word200'));
    // Past Slack's 6 s the second reply is closed: the next append is refused, the reply repaired, the answer carried on.
    await new Promise((resolve) => setTimeout(resolve, 6_500));
    expect((await runs.postEvent(runId, event(1, 3, 'assistant', { text: `${words(200)} and the end` }))).status).toBe(200);
    await slack.waitForCall('chat.update', (c) => c.body.channel === mention.channel && typeof c.body.markdown_text === 'string');
    expect((await runs.postEvent(runId, event(1, 4, 'terminal'))).status).toBe(200);
    expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  } finally {
    slack.configure({ strict: { streamMaxAgeMs: STRICT_DEFAULTS.streamMaxAgeMs } });
  }
  await save('slack-event-stream-segments', handle);
});

it('records a follow-up in a thread that waits for the request ahead of it, then runs with the thread as context (slack-conversation)', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  await stack.services.database.db
    .updateTable('slack_connections')
    .set({ thread_follow_ups: 'asker' })
    .where('id', '=', connection.connectionId)
    .execute();
  const slackUserId = newSlackUserId();
  await linkSlackUser(connection, member.headers, slackUserId);
  await markRuntimeOnline(stack, member);
  const ts = newTs();
  const mention = {
    type: 'app_mention',
    user: slackUserId,
    text: `<@${connection.botUserId}> first`,
    ts,
    channel: 'C0RECORD',
    event_ts: ts,
  };
  expect((await postSlackEvent(stack, connection, eventEnvelope(connection, mention))).status).toBe(200);
  const first = stack.services.temporal.client.workflow.getHandle(invocationWorkflowId(connection.connectionId, mention));
  const claimed = await claimRoutedRun(first, member.headers);
  const followUp = channelMessage(slackUserId, 'second', { channel: 'C0RECORD', thread: { ts, parentUserId: slackUserId } });
  expect((await postSlackEvent(stack, connection, eventEnvelope(connection, followUp))).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(invocationWorkflowId(connection.connectionId, followUp));
  await waitFor(async () => (await handle.query(slackEventStateQuery)).detail === 'queued');
  expect((await claimed.runs.postEvent(claimed.runId, event(1, 1, 'assistant', { text: 'first answer' }))).status).toBe(200);
  expect((await claimed.runs.postEvent(claimed.runId, event(1, 2, 'terminal'))).status).toBe(200);
  expect(await first.result()).toMatchObject({ status: 'replied' });
  const state = await waitFor(async () => {
    const s = await handle.query(slackEventStateQuery);
    return s.runId && s.detail !== 'queued' ? s : undefined;
  });
  const runs = runsClient(stack, member.headers);
  await waitFor(async () => (await runs.claim(state.runId!)).status === 200);
  expect((await runs.get(state.runId!)).json.input.context).toHaveLength(2);
  expect((await runs.postEvent(state.runId!, event(1, 1, 'assistant', { text: 'second answer' }))).status).toBe(200);
  expect((await runs.postEvent(state.runId!, event(1, 2, 'terminal'))).status).toBe(200);
  expect(await handle.result()).toMatchObject({ status: 'replied' });
  await save('slack-event-follow-up', handle);
  await save(
    'slack-event-child-run-follow-up',
    stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, state.runId!)),
  );
});

it('records a mention whose member the breaker paused (slack-runtime-gate)', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  const slackUserId = newSlackUserId();
  await linkSlackUser(connection, member.headers, slackUserId);
  const broken = eventEnvelope(connection, appMention(slackUserId, 'crash'));
  expect((await postSlackEvent(stack, connection, broken)).status).toBe(200);
  const crashed = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, broken.event_id));
  const { runs, runId } = await claimRoutedRun(crashed, member.headers);
  const failure = { status: 'failed', error: 'segfault', failure: 'runtime' };
  expect((await runs.postEvent(runId, event(1, 1, 'terminal', failure))).status).toBe(200);
  expect(await crashed.result()).toMatchObject({ runStatus: 'failed' });
  const paused = eventEnvelope(connection, appMention(slackUserId, 'again'));
  expect((await postSlackEvent(stack, connection, paused)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, paused.event_id));
  expect(await handle.result()).toMatchObject({ status: 'paused', detail: 'open' });
  await save('slack-event-paused', handle);
});

it('records a DM in the app’s thread: its status while the run works, its title, and the status cleared (slack-conversation)', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  const slackUserId = newSlackUserId();
  await linkSlackUser(connection, member.headers, slackUserId);
  await markRuntimeOnline(stack, member);
  const envelope = eventEnvelope(connection, directMessage(slackUserId, 'assist me', 'D0RECORD'));
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  const { runs, runId } = await claimRoutedRun(handle, member.headers);
  await slack.waitForCall('assistant.threads.setTitle', (c) => c.body.channel_id === 'D0RECORD');
  expect((await runs.postEvent(runId, event(1, 1, 'capability_execution', { tool: 'search' }))).status).toBe(200);
  await slack.waitForCall('assistant.threads.setStatus', (c) => c.body.status === 'is using search…');
  expect((await runs.postEvent(runId, event(1, 2, 'assistant', { text: 'assisted' }))).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 3, 'terminal'))).status).toBe(200);
  expect(await handle.result()).toMatchObject({ status: 'replied' });
  await save('slack-event-assistant-thread', handle);
});

it('records a Home tab opened', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  const envelope = eventEnvelope(connection, appHomeOpened(newSlackUserId(), 'home'));
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  expect(await handle.result()).toMatchObject({ status: 'replied' });
  await save('slack-event-home', handle);
});

it('records an app_uninstalled that ends an invocation waiting for a link (slack-connection-removal)', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
  const waiting = eventEnvelope(connection, appMention(newSlackUserId(), 'hold me'));
  expect((await postSlackEvent(stack, connection, waiting)).status).toBe(200);
  const held = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, waiting.event_id));
  await waitFor(async () => (await held.query(slackEventStateQuery)).status === 'awaiting_link');
  const uninstalled = eventEnvelope(connection, { type: 'app_uninstalled', event_ts: `${Math.floor(Date.now() / 1000)}.000100` });
  expect((await postSlackEvent(stack, connection, uninstalled)).status).toBe(200);
  const lifecycle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, uninstalled.event_id));
  expect(await lifecycle.result()).toMatchObject({ status: 'connection_disabled', detail: 'app_uninstalled' });
  expect(await held.result()).toMatchObject({ status: 'connection_removed', detail: 'app_uninstalled' });
  await save('slack-event-app-uninstalled', lifecycle);
  await save('slack-event-connection-removed', held);
});

it('records a GitHub push delivery', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const payload = githubExample('push');
  const installationId = freshId();
  const repositoryId = freshId();
  const fullName = `record/${randomUUID().slice(0, 8)}`;
  payload.installation = { ...(payload.installation ?? {}), id: installationId };
  payload.repository = { ...payload.repository, id: repositoryId, full_name: fullName };
  await ownedTarget(stack.services.database.db, {
    organizationId: org.organizationId,
    installationId,
    repositoryFullName: fullName,
    repositoryId,
  });
  const deliveryId = randomUUID();
  expect((await deliver(stack, { event: 'push', deliveryId, payload, secret: SECRET })).status).toBe(202);
  const handle = stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId));
  await handle.result();
  await save('github-delivery-push', handle);
});

it('records a GitHub target syncing two pushes, one retried after a 500, then closing when idle', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const repo = await syncedRepo(stack.services.database.db, github, org.organizationId, () => stack, SECRET);
  const files = { '.claude-plugin/plugin.json': '{"name":"recorded"}', 'skills/a/SKILL.md': '# A' };
  const first = await repo.push(files);
  const rows = () =>
    stack.services.database.db.selectFrom('github_sync_events').select('status').where('target_id', '=', repo.targetId).execute();
  await waitFor(async () => (await rows()).length === 1 && (await rows()).every((r) => r.status === 'completed') && true, 20_000);
  github.fail((c) => c.kind === 'tree' && c.repository === repo.fullName.toLowerCase(), 500, 1);
  await repo.push({ ...files, 'skills/a/SKILL.md': '# A, changed' });
  await waitFor(async () => (await rows()).length === 2 && (await rows()).every((r) => r.status === 'completed') && true, 20_000);
  const handle = stack.services.temporal.client.workflow.getHandle(githubTargetWorkflowId(repo.targetId));
  expect(await handle.result()).toMatchObject({ targetId: repo.targetId, syncs: 2 });
  expect(first.response.status).toBe(202);
  await save('github-target-sync', handle);
});

it('records a GitHub target that waits out a rate limit on a timer and takes back a push its lagging read reopened', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const repo = await syncedRepo(stack.services.database.db, github, org.organizationId, () => stack, SECRET);
  const files = { '.claude-plugin/plugin.json': '{"name":"recorded"}' };
  const rows = () =>
    stack.services.database.db.selectFrom('github_sync_events').selectAll().where('target_id', '=', repo.targetId).execute();
  const first = await repo.push(files);
  await waitFor(async () => (await rows()).length === 1 && (await rows()).every((r) => r.status === 'completed') && true, 20_000);
  // The next sync meets a secondary limit (retry-after 1 s): a push arrives while it waits and joins it.
  github.secondaryRateLimit(repo.installationId, { retryAfterSeconds: 1 });
  const second = await repo.push({ ...files, 'skills/a/SKILL.md': '# A' });
  await waitFor(
    async () => (await rows()).some((r) => r.delivery_id === second.deliveryId && r.error_code === 'rate_limited') && true,
    20_000,
  );
  const third = await repo.push({ ...files, 'skills/a/SKILL.md': '# A, again' });
  // Its first read of the branch lags behind both pushes: the older is reopened, then superseded.
  github.lagRefReads(repo.fullName, 'master', [first.sha]);
  await waitFor(
    async () => (await rows()).length === 3 && (await rows()).every((r) => ['completed', 'superseded'].includes(r.status)) && true,
    20_000,
  );
  const handle = stack.services.temporal.client.workflow.getHandle(githubTargetWorkflowId(repo.targetId));
  expect(await handle.result()).toMatchObject({ targetId: repo.targetId, last: { outcome: 'synced', headSha: third.sha } });
  await save('github-target-rate-limited', handle);
});

it('records a GitHub target whose sync activity gave up: the batch ends failed, recorded, and the workflow goes on to close', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const n = freshId();
  const targetId = await ownedTarget(stack.services.database.db, {
    organizationId: org.organizationId,
    installationId: freshId(),
    repositoryFullName: `record/broken-${n}`,
    repositoryId: n,
  });
  const target = (await getTarget(stack.services.database.db, targetId))!;
  // A worker of its own whose sync activity always gives up, as one whose retries ran out on a broken Postgres would.
  const taskQueue = `record-${randomUUID()}`;
  const connection = await NativeConnection.connect({ address: stack.config.temporal.address! });
  const real = createGithubActivities({
    db: stack.services.database.db,
    settings: stack.config.github,
    ingress: stack.ingress,
    platform: { publicBaseUrl: 'http://127.0.0.1', taskQueue, authCaches: stack.config.authCaches },
    log: stack.services.log,
  });
  const worker = await Worker.create({
    connection,
    namespace: stack.config.temporal.namespace,
    taskQueue,
    workflowBundle: { codePath: stack.config.temporal.workflowBundlePath! },
    activities: {
      ...real,
      githubSyncTarget: async () => {
        throw ApplicationFailure.nonRetryable('the sync broke for good', 'RecordedFault');
      },
    },
  });
  const handle = await worker.runUntil(async () => {
    const eventId = await recordResync(stack.services.database.db, { target, reason: 'manual' });
    const started = await stack.services.temporal.client.workflow.signalWithStart('githubTarget', {
      workflowId: githubTargetWorkflowId(targetId),
      taskQueue,
      args: [{ targetId, repository: target.repository, idleMs: 1000 }],
      signal: 'githubSyncRequested',
      signalArgs: [{ eventId, full: true }],
    });
    expect(await started.result()).toMatchObject({ syncs: 1, last: { outcome: 'failed', code: 'sync_error' } });
    return started;
  });
  await connection.close();
  await save('github-target-activity-failed', handle);
});

it('records a GitHub unsuspend that brings a target back and hands its resync to the target’s workflow', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const repo = await syncedRepo(stack.services.database.db, github, org.organizationId, () => stack, SECRET);
  const first = await repo.push({ '.claude-plugin/plugin.json': '{"name":"recorded"}' });
  expect(first.response.status).toBe(202);
  const row = () =>
    stack.services.database.db.selectFrom('github_connector_targets').selectAll().where('id', '=', repo.targetId).executeTakeFirstOrThrow();
  await waitFor(async () => (await row()).synced_sha === first.sha, 20_000);
  const lifecycle = async (action: 'suspend' | 'unsuspend') => {
    const payload = githubExample('installation', (p) => p.action === action);
    payload.installation.id = repo.installationId;
    const deliveryId = randomUUID();
    expect((await deliver(stack, { event: 'installation', deliveryId, payload, secret: SECRET })).status).toBe(202);
    const handle = stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId));
    await handle.result();
    return handle;
  };
  github.suspendInstallation(repo.installationId);
  await lifecycle('suspend');
  // Moved while suspended: GitHub sent no push.
  const moved = github.commit(repo.fullName, repo.installationId, 'master', { '.claude-plugin/plugin.json': '{"name":"moved"}' });
  github.unsuspendInstallation(repo.installationId);
  const handle = await lifecycle('unsuspend');
  await waitFor(async () => (await row()).synced_sha === moved, 20_000);
  await save('github-delivery-unsuspend', handle);
});

it('records a reconcile asking for a failed delivery again and resyncing a target whose head moved', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const repo = await syncedRepo(stack.services.database.db, github, org.organizationId, () => stack, SECRET);
  redeliverInto(github, () => stack);
  // Refused by the service while its Temporal is stopped: a 503 in GitHub's delivery log.
  const down = await startTestStack({
    env: { ...fakeGithubEnv(github, SECRET), TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`, TEMPORAL_START_TIMEOUT: '1s' },
  });
  const refused = await repo.pushLogged({ '.mcp.json': '{"mcpServers":{}}' }, down).finally(() => down.stop());
  expect(refused.response.status).toBe(503);
  const handle = await stack.services.temporal.client.workflow.start('githubReconcile', {
    workflowId: `${githubReconcileScheduleId(stack.config.temporal.taskQueue)}/record-${randomUUID()}`,
    taskQueue: stack.config.temporal.taskQueue,
    args: [],
  });
  const summary = (await handle.result()) as { redeliveriesAsked: number; targetsResynced: number };
  expect(summary.redeliveriesAsked).toBe(1);
  expect(summary.targetsResynced).toBeGreaterThanOrEqual(1);
  await save('github-reconcile', handle);
});

it('records an MCP resolve', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const res = await stack.request('POST', '/v1/mcp-connections/resolve', { headers: org.owner.headers, body: { query: 'acme' } });
  expect(res.status).toBe(200);
  const listed = stack.services.temporal.client.workflow.list({ query: `WorkflowType = 'mcpResolve'` });
  let saved = false;
  for await (const info of listed) {
    await save('mcp-resolve', stack.services.temporal.client.workflow.getHandle(info.workflowId));
    saved = true;
    break;
  }
  expect(saved).toBe(true);
});
