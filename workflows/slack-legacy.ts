/**
 * The slack-event workflow's replay-only branches, fenced off from the live code.
 *
 * Every `patched()` call of the Slack workflow is in this file, in the section of its patch id:
 * the live modules (workflows/slack.ts, workflows/slack-answer.ts) ask the hooks below and never
 * call `patched()` themselves. Each hook answers what the live branch needs; what runs only when a
 * history recorded before the patch replays stays in its section. To retire a patch (when, and
 * the steps: docs/operations.md, "Retiring a workflow patch"), its section is all that changes:
 * `deprecatePatch()` in place of `patched()`, the old branch deleted, the hook answering the live
 * branch; and, a release later, the hook deleted with the calls the compiler then points to.
 */
import { ActivityFailure, executeChild, patched, sleep, workflowInfo } from '@temporalio/workflow';
import type { SlackActivities } from '../activities/slack';
import type { ActivityCall } from './local-first';
import { automationRun } from './runs';
import { runReplyText } from '../src/slack/texts';
import { editDelay } from '../src/slack/progress';
import {
  LINK_DECISION_PATCH,
  SLACK_ANSWER_PATCH,
  SLACK_CONTINUE_AS_NEW_PATCH,
  SLACK_CONVERSATION_PATCH,
  SLACK_LOCAL_RECORDS_PATCH,
  SLACK_PROGRESS_PATCH,
  SLACK_REMOVAL_PATCH,
  SLACK_STREAM_SEGMENTS_PATCH,
  SLACK_RUNTIME_GATE_PATCH,
  type SlackEventState,
} from '../src/slack/contract';
import {
  bestEffort,
  childRunOptions,
  localRecords,
  outcomeOf,
  outcomeOfFailure,
  postAccepted,
  regularRecords,
  slackApi,
  startInvocationRun,
  type Invocation,
  type MessageRef,
  type ReservedRun,
  type RunOutcome,
} from './slack-invocation';

// ─── slack-local-records ──────────────────────────────────────────────────────────────────────

/** The event's Postgres records: local activities first; events started before the patch keep regular activities. */
export function eventRecords(): ActivityCall<SlackActivities> {
  return patched(SLACK_LOCAL_RECORDS_PATCH) ? localRecords : regularRecords;
}

// ─── slack-connection-removal ─────────────────────────────────────────────────────────────────

/**
 * Whether a removed connection counts: `app_uninstalled` uninstalls the connection, a removal
 * signal is taken, and a removed connection ends the invocation `connection_removed`. Ask it only
 * where it decides. Before the patch, `app_uninstalled` only disabled the connection, an
 * invocation waited out its link wait whatever became of its connection, and the signal (which
 * an older worker had no handler for) was not taken.
 */
export const takesConnectionRemoval = (): boolean => patched(SLACK_REMOVAL_PATCH);

// ─── link-decision-reads-link ─────────────────────────────────────────────────────────────────

/**
 * Whether a link wait that timed out expires the invocation even though a link was recorded (it
 * landed in the timer's activation, or while the pending row was cleared): before the patch it
 * did; now the recorded link routes the invocation. Ask it only when a link was recorded.
 */
export const linkTimeoutExpires = (gotLink: boolean): boolean => !gotLink && !patched(LINK_DECISION_PATCH);

// ─── slack-continue-as-new ────────────────────────────────────────────────────────────────────

/**
 * Whether an invocation whose history is due continues as new while it follows its run. Before
 * the patch it never did: its run's end is the only way out, and the caller stops asking.
 */
export const continuesAsNew = (): boolean => patched(SLACK_CONTINUE_AS_NEW_PATCH);

// ─── slack-stream-segments ────────────────────────────────────────────────────────────────────

/**
 * Whether the streamed answer goes in segments (workflows/slack-stream.ts): ask it only where the
 * segments change what is sent (a reply to stop, repair or start, a write cut otherwise, a timer
 * for a reply's age), since what fits one call is sent the same either way. Before the patch, the
 * one stream took every append, its answer was one chat.stopStream activity, and an append Slack
 * refused turned the thread to edits and replies.
 */
export const streamsInSegments = (): boolean => patched(SLACK_STREAM_SEGMENTS_PATCH);
// ─── slack-conversation ───────────────────────────────────────────────────────────────────────

/**
 * Whether the invocation's thread is a conversation: the run carries the thread's earlier messages
 * as its context, a follow-up waits for the request ahead of it in its thread, and an assistant
 * thread shows the run's status and gets its title. Before the patch the run started with the text
 * alone, at once, and the thread showed messages only.
 */
export const takesConversation = (): boolean => patched(SLACK_CONVERSATION_PATCH);

// ─── slack-runtime-gate ───────────────────────────────────────────────────────────────────────

/**
 * Whether the invocation asks the member's breaker and runtime before its run starts: a paused
 * member is told and gets no run, and a member without a runtime online is told so in the first
 * message. Before the patch the run started at once, whatever became of it.
 */
export const takesRuntimeGate = (): boolean => patched(SLACK_RUNTIME_GATE_PATCH);

// ─── slack-progress and slack-answer-lands ────────────────────────────────────────────────────

/** The live path's progress loop, edits only, over a message already posted: when the next edit may go out. */
type KeepEditing = (ts: string, done: () => boolean) => Promise<number>;

/**
 * How an event from before slack-progress or slack-answer-lands answers, or null for the live
 * path (workflows/slack-answer.ts). Before slack-progress, the run's answer was posted once, at
 * the end; before slack-answer-lands, one message was edited, the slot freed after the last edit,
 * a refused final edit ended `reply_failed`, and nothing streamed.
 */
export function olderAnswer(job: Invocation, run: ReservedRun, keepEditing: KeepEditing): Promise<SlackEventState> | null {
  if (!patched(SLACK_PROGRESS_PATCH)) return answerOnceAtEnd(job, run);
  if (!patched(SLACK_ANSWER_PATCH)) return runWithMessage(job, run, keepEditing);
  return null;
}

/** Before slack-progress: the run awaited as a child, the slot freed, then the answer posted once. */
async function answerOnceAtEnd(job: Invocation, run: ReservedRun): Promise<SlackEventState> {
  const { input, invocation, records, state, setStatus, cleanup } = job;
  job.setStatus('run_created');
  let summary: RunOutcome;
  try {
    summary = await executeChild(automationRun, childRunOptions(job, run));
  } catch (error) {
    summary = outcomeOfFailure(error);
  }
  await records('slackReleaseInvocation', { connectionId: input.connectionId, eventId: input.eventId });
  cleanup.reserved = false;
  state.runStatus = summary.status;
  const reply = await bestEffort(() =>
    slackApi.slackPostMessage({
      connectionId: input.connectionId,
      channel: invocation.channel,
      threadTs: run.threadTs,
      text: runReplyText(summary),
      replyKey: workflowInfo().workflowId,
    }),
  );
  setStatus(reply === 'posted' ? 'replied' : reply === 'skipped' ? 'reply_skipped' : 'reply_failed');
  return state;
}

/** A final edit Slack keeps rate-limiting is given up after this many waits. */
const FINAL_EDIT_TRIES = 10;

/**
 * Before slack-answer-lands: the run with its one message, started and announced at once
 * ("Working on it…" and the Cancel button), kept current by edits while it works, and answered
 * in place.
 */
async function runWithMessage(job: Invocation, run: ReservedRun, keepEditing: KeepEditing): Promise<SlackEventState> {
  const { input, records, state, setStatus, cleanup } = job;
  const ref: MessageRef = { connectionId: input.connectionId, channel: job.invocation.channel, threadTs: run.threadTs };
  const replyKey = workflowInfo().workflowId;
  // The run starts and the message is posted in the same workflow task: the member sees it at once.
  const [child, ts] = await Promise.all([startInvocationRun(job, run), postAccepted(ref, { runId: run.runId, replyKey })]);
  let done = false;
  // Kept for after the run: a cancel rejects the loop's wait while this awaits the run, and a
  // rejection nobody handles yet would fail the workflow task.
  let progressFailure: unknown;
  const progress = (ts === null ? Promise.resolve(0) : keepEditing(ts, () => done)).catch((error: unknown) => {
    progressFailure = error;
    return 0;
  });
  const summary = await outcomeOf(child);
  done = true;
  const nextAt = await progress;
  if (progressFailure !== undefined) throw progressFailure;
  // The answer is an edit too: it keeps the interval after the last one.
  const wait = editDelay(Date.now(), nextAt);
  if (wait > 0) await sleep(wait);
  await records('slackReleaseInvocation', { connectionId: input.connectionId, eventId: input.eventId });
  cleanup.reserved = false;
  state.runStatus = summary.status;
  const reply = await finishMessage(ref, { ts, summary, replyKey });
  if (summary.status === 'cancelled') setStatus('cancelled', summary.error ?? 'cancel_requested');
  else setStatus(reply === 'posted' ? 'replied' : reply === 'skipped' ? 'reply_skipped' : 'reply_failed');
  return state;
}

/** The answer in the message (or as new replies if it is gone); a 429 waits its Retry-After on a timer. */
async function finishMessage(
  ref: MessageRef,
  answer: { ts: string | null; summary: RunOutcome; replyKey: string },
): Promise<'posted' | 'skipped' | 'failed'> {
  const { ts, summary, replyKey } = answer;
  // A succeeded run's answer goes as the runtime's Markdown, which the activity converts (and escapes).
  const markdown = summary.status === 'succeeded' && !!summary.lastAssistantText?.trim();
  const request = { ...ref, ts, text: markdown ? summary.lastAssistantText! : runReplyText(summary), markdown, replyKey };
  for (let tries = 1; ; tries++) {
    let finished: Awaited<ReturnType<SlackActivities['slackFinishMessage']>>;
    try {
      finished = await slackApi.slackFinishMessage(request);
    } catch (error) {
      if (error instanceof ActivityFailure) return 'failed';
      throw error;
    }
    if (finished.outcome !== 'ratelimited') {
      return finished.outcome === 'skipped' ? 'skipped' : finished.outcome === 'failed' ? 'failed' : 'posted';
    }
    if (tries >= FINAL_EDIT_TRIES) return 'failed';
    await sleep(finished.retryAfterMs);
  }
}
