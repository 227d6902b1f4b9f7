/**
 * An invocation that follows a long run continues as new past SLACK_CONTINUE_AS_NEW_EVENTS (here
 * 60 events, for Temporal's suggestion at thousands), over the real stack with `den runtime --exec`
 * as a child process: the run, no longer its child, sends its progress and its end to the
 * invocation's workflow id, and the answer lands once in the thread; a Cancel after the
 * continue-as-new still ends the run, and a cancel of the invocation itself is passed on to it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { runWorkflowId } from '../../src/runs/contract';
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { CANCEL_ACTION_ID } from '../../src/slack/progress';
import type { TestMember } from '../harness/identity';
import { startScriptRuntime, stopRuntimes, type Spawned } from '../harness/process';
import { appMention, blockActions, eventEnvelope, linkSlackUser, postInteraction, postSlackEvent, startSlackLoop } from '../harness/slack';
import { waitFor } from '../harness/wait';

const CONTINUE_AS_NEW_EVENTS = 60;
let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let dir: string;
const runtimes: Spawned[] = [];

beforeAll(async () => {
  loop = await startSlackLoop({
    SLACK_PROGRESS_INTERVAL: '300ms',
    SLACK_REPLY_MODE: 'edit',
    SLACK_CONTINUE_AS_NEW_EVENTS: String(CONTINUE_AS_NEW_EVENTS),
  });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-slack-can-'));
}, 60_000);
afterAll(async () => {
  await stopRuntimes(runtimes);
  await loop.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** `den runtime --exec` for a member, reporting its output every 100 ms. */
const startRuntime = (member: TestMember, script: string) =>
  startScriptRuntime({ url: loop.stack.url, apiKey: member.apiKey }, { dir, name: member.memberId, text: script }, runtimes);

async function mention(script: string, text: string) {
  const member = await loop.org.addMember('member');
  const slackUserId = await linkSlackUser(loop.stack, loop.connection, member);
  await startRuntime(member, script);
  const event = appMention(slackUserId, text);
  const envelope = eventEnvelope(loop.connection, event);
  expect((await postSlackEvent(loop.stack, loop.connection, envelope)).json).toEqual({ ok: true });
  const handle = loop.stack.services.temporal.client.workflow.getHandle(
    slackEventWorkflowId(loop.connection.connectionId, envelope.event_id),
  );
  return { member, slackUserId, event, handle };
}

/** The executions of the invocation so far, first to last, each with its history's events. */
async function executions(handle: WorkflowHandle) {
  const client = loop.stack.services.temporal.client.workflow;
  type Events = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>;
  const chain: { runId: string; events: Events }[] = [];
  let runId: string | undefined = (await handle.describe()).runId;
  while (runId) {
    const events: Events = (await client.getHandle(handle.workflowId, runId).fetchHistory()).events ?? [];
    chain.unshift({ runId, events });
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return chain;
}

const continuedAsNew = (events: { eventType?: unknown; workflowExecutionContinuedAsNewEventAttributes?: unknown }[]) =>
  events.some((e) => e.workflowExecutionContinuedAsNewEventAttributes);

it('a long run: the invocation continues as new past the stated history length, and the answer lands once, in place', async () => {
  // About 6 s of output, a line every 100 ms: a progress edit every interval.
  const script = 'i=0; while [ $i -lt 60 ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done; echo "the long answer"';
  const { event, handle } = await mention(script, 'a long one');
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  const chain = await executions(handle);
  expect(chain.length).toBeGreaterThanOrEqual(2);
  for (const execution of chain.slice(0, -1)) {
    expect(continuedAsNew(execution.events)).toBe(true);
    // Only at the stated length: each execution reached it before it continued.
    expect(execution.events.length).toBeGreaterThanOrEqual(CONTINUE_AS_NEW_EVENTS);
  }
  const thread = loop.slack.messages.filter((m) => m.channel === event.channel && m.thread_ts === event.ts);
  // Edited in place: one message, which ends as the answer, with no Cancel button left.
  expect(thread).toHaveLength(1);
  expect(thread[0]!.text).toContain('the long answer');
  expect(JSON.stringify(thread[0]!.blocks ?? null)).not.toContain(CANCEL_ACTION_ID);
}, 120_000);

it('a Cancel after the continue-as-new ends the run, and the thread says it was cancelled', async () => {
  const script = 'i=0; while [ $i -lt 300 ]; do echo "step $i"; i=$((i+1)); sleep 0.1; done; echo "never"';
  const { event, slackUserId, handle } = await mention(script, 'cancel me later');
  await waitFor(async () => (await executions(handle)).length >= 2, 60_000, { what: 'a continue-as-new' });
  const runId = (await handle.query(slackEventStateQuery)).runId!;
  const click = await postInteraction(
    loop.stack,
    loop.connection,
    blockActions(loop.connection, {
      user: slackUserId,
      actionId: CANCEL_ACTION_ID,
      value: runId,
      channel: event.channel,
      threadTs: event.ts,
      responseUrl: loop.slack.responseUrl(`T/${runId}`),
    }),
  );
  expect(click.status).toBe(200);
  expect(await handle.result()).toMatchObject({ status: 'cancelled', runStatus: 'cancelled' });
  const thread = loop.slack.messages.filter((m) => m.channel === event.channel && m.thread_ts === event.ts);
  const texts = thread.map((m) => m.text).join('\n');
  expect(texts).toContain('The run was cancelled');
  expect(texts).not.toContain('never');
}, 120_000);

it('a cancel of the invocation after the continue-as-new is passed on to its run, which is no longer its child', async () => {
  const script = 'i=0; while [ $i -lt 300 ]; do echo "step $i"; i=$((i+1)); sleep 0.1; done';
  const { member, handle } = await mention(script, 'stop from outside');
  await waitFor(async () => (await executions(handle)).length >= 2, 60_000, { what: 'a continue-as-new' });
  const runId = (await handle.query(slackEventStateQuery)).runId!;
  await handle.cancel();
  expect(await handle.result()).toMatchObject({ status: 'cancelled' });
  const run = loop.stack.services.temporal.client.workflow.getHandle(runWorkflowId(member.organizationId, runId));
  await waitFor(async () => (await run.describe()).status.name !== 'RUNNING', 30_000, { what: 'the run to end' });
  const row = await loop.stack.services.database.db
    .selectFrom('automation_runs')
    .select('status')
    .where('run_id', '=', runId)
    .executeTakeFirstOrThrow();
  expect(row.status).toBe('cancelled');
}, 120_000);
