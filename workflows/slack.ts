/**
 * One Slack event, `slack-event/{connectionId}/{event_id}`. Started by the events
 * route before it acks, so the id is also the dedupe key of Slack's retries.
 *
 * - Lifecycle (app_uninstalled, tokens_revoked): disable the connection.
 * - Invocation (app_mention, DM): find the Slack user's member, or hold the invocation for
 *   SLACK_LINK_WAIT while an ephemeral message offers a connect link; apply the member's limits;
 *   run it as a queued automation run (a child workflow) for the member's runtime to claim;
 *   post one message in the thread at once ("Working on it…", with a Cancel button), edit it as
 *   the run reports progress (at most once per interval, on a timer), and replace it with the
 *   run's answer. Events from before SLACK_PROGRESS_PATCH reply once, at the end.
 */
import {
  ActivityFailure,
  CancellationScope,
  ChildWorkflowFailure,
  condition,
  executeChild,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  startChild,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { SlackActivities } from '../activities/slack';
import { byName, localFirst, LOCAL_POSTGRES_EFFECT, type ActivityCall } from './local-first';
import { automationRun } from './runs';
import { limitText, runReplyText } from '../src/slack/texts';
import { editDelay, newerProgress, nextEditAt, progressText } from '../src/slack/progress';
import {
  runProgressSignal,
  runSummaryOfFailure,
  runWorkflowId,
  type RunProgress,
  type RunSummary,
  type RunWorkflowInput,
} from '../src/runs/contract';
import {
  LINK_DECISION_PATCH,
  SLACK_LOCAL_RECORDS_PATCH,
  SLACK_PROGRESS_PATCH,
  slackSearchAttributes,
  slackAccountLinkedSignal,
  slackEventStateQuery,
  type SlackAccountLinked,
  type SlackEventInput,
  type SlackEventState,
  type SlackEventStatus,
} from '../src/slack/contract';
import { implementsWorkflow } from '../src/app/temporal/contract';
import { slackEventWorkflow } from '../src/slack/contract';

/** Postgres work: retried until it succeeds (Postgres outages must not lose an invocation). */
const RECORDS = { startToCloseTimeout: '30s', retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' } } as const;
/**
 * The same work locally first: a marker instead of an activity's three events, a
 * workflow task and a task-queue round trip; after 10 s of failures, the regular activity, still
 * retried without bound. Events started before SLACK_LOCAL_RECORDS_PATCH keep regular activities.
 */
const localRecords = localFirst<SlackActivities>(LOCAL_POSTGRES_EFFECT, RECORDS);
const regularRecords = byName<SlackActivities>(RECORDS);

/** Slack Web API: a 429's Retry-After overrides the interval (activities/slack.ts). Bounded. */
const slackApi = proxyActivities<SlackActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m', maximumAttempts: 6 },
});

/** A progress edit is worth little once stale: a few quick tries, then the next state goes out. */
const progressApi = proxyActivities<SlackActivities>({
  startToCloseTimeout: '15s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '5s', maximumAttempts: 3 },
});

export async function slackEvent(input: SlackEventInput): Promise<SlackEventState> {
  const records = patched(SLACK_LOCAL_RECORDS_PATCH) ? localRecords : regularRecords;
  const state: SlackEventState = { status: 'received', memberId: null, runId: null, runStatus: null, detail: null };
  let linked: SlackAccountLinked | undefined;
  let progress: RunProgress | null = null;
  setHandler(slackEventStateQuery, () => state);
  setHandler(slackAccountLinkedSignal, (link) => {
    if (input.invocation && link.slackUserId === input.invocation.user && link.organizationId === input.organizationId) linked ??= link;
  });
  // Only the invocation's own run reports here; its newest report is what the message shows.
  setHandler(runProgressSignal, (report) => {
    if (report.runId === state.runId) progress = newerProgress(progress, report);
  });
  const setStatus = (status: SlackEventStatus, detail: string | null = null) => {
    state.status = status;
    state.detail = detail;
    upsertSearchAttributes([{ key: slackSearchAttributes.SlackEventStatus, value: status }]);
  };
  const cleanup: Cleanup = { pendingLink: false, reserved: false };
  try {
    return await handle(input, records, state, setStatus, { link: () => linked, progress: () => progress }, cleanup);
  } catch (error) {
    if (!isCancellation(error)) throw error;
    // Cancelled: the run child got the cancel too and closed `cancelled` (the default
    // child cancellation waits for that); nothing of the member's may stay held.
    // Regular activities here, even under SLACK_LOCAL_RECORDS_PATCH: done locally, the cleanup
    // and the completion would share the cancel's workflow task, and an activity the cancel left
    // running (the connect prompt) that reports back meanwhile makes Temporal refuse that
    // completion (a workflow task failed with UnhandledCommand, retried, but shown to operators).
    await CancellationScope.nonCancellable(async () => {
      const { connectionId, eventId } = input;
      if (cleanup.pendingLink) await regularRecords('slackClearPending', { connectionId, eventId });
      if (cleanup.reserved) await regularRecords('slackReleaseInvocation', { connectionId, eventId });
    });
    setStatus('cancelled', 'cancel_requested');
    return state;
  }
}

/** What a cancel must undo, in a scope the cancel cannot reach. */
interface Cleanup {
  pendingLink: boolean;
  reserved: boolean;
}

type SetStatus = (status: SlackEventStatus, detail?: string | null) => void;

/** What the steps of one invocation share. */
interface Invocation {
  input: SlackEventInput;
  invocation: NonNullable<SlackEventInput['invocation']>;
  records: ActivityCall<SlackActivities>;
  state: SlackEventState;
  setStatus: SetStatus;
  signals: Signals;
  cleanup: Cleanup;
  /** Where the ephemeral messages go. */
  thread: { connectionId: string; channel: string; user: string; threadTs: string | null };
}

type Member = { organizationId: string; memberId: string };

/** What the signals brought: the link an invocation waits for, and the run's newest progress. */
interface Signals {
  link: () => SlackAccountLinked | undefined;
  progress: () => RunProgress | null;
}

async function handle(
  input: SlackEventInput,
  records: ActivityCall<SlackActivities>,
  state: SlackEventState,
  setStatus: SetStatus,
  signals: Signals,
  cleanup: Cleanup,
): Promise<SlackEventState> {
  if (input.lifecycle) {
    await records('slackDisableConnection', { connectionId: input.connectionId, reason: input.lifecycle.type });
    setStatus('connection_disabled', input.lifecycle.type);
    return state;
  }
  const invocation = input.invocation;
  if (!invocation) return state;
  const thread = { connectionId: input.connectionId, channel: invocation.channel, user: invocation.user, threadTs: invocation.threadTs };
  const job: Invocation = { input, invocation, records, state, setStatus, signals, cleanup, thread };

  // 1. Who is asking: the linked member, or wait for the link.
  const member = await findMember(job);
  if (!member) return state;
  state.memberId = member.memberId;

  // 2. The member's limits.
  const runId = await reserveInvocation(job, member);
  if (runId === null) return state;

  // 3. The run: queued until the member's runtime claims it.
  const threadTs = invocation.threadTs ?? invocation.ts;
  if (patched(SLACK_PROGRESS_PATCH)) return runWithMessage(job, member, runId, threadTs);
  const summary = await runInvocation(job, member, runId, threadTs);
  await records('slackReleaseInvocation', { connectionId: input.connectionId, eventId: input.eventId });
  cleanup.reserved = false;
  state.runStatus = summary.status;

  // 4. The answer, in the thread.
  const reply = await bestEffort(() =>
    slackApi.slackPostMessage({
      connectionId: input.connectionId,
      channel: invocation.channel,
      threadTs,
      text: runReplyText(summary),
      replyKey: workflowInfo().workflowId,
    }),
  );
  setStatus(reply === 'posted' ? 'replied' : reply === 'skipped' ? 'reply_skipped' : 'reply_failed');
  return state;
}

/** The Slack user's linked member, or the one a link recorded while the invocation waited; null once the wait expired. */
async function findMember(job: Invocation): Promise<Member | null> {
  const { input, invocation, records, setStatus, cleanup } = job;
  const { connectionId, eventId, settings } = input;
  const member: Member | null = await records('slackLinkOrWait', {
    connectionId,
    slackUserId: invocation.user,
    eventId,
    workflowId: workflowInfo().workflowId,
    waitMs: settings.linkWaitMs,
  });
  if (member) return member;
  cleanup.pendingLink = true;
  setStatus('awaiting_link');
  await bestEffort(() => slackApi.slackPostConnectPrompt({ ...job.thread, waitMs: settings.linkWaitMs }));
  const gotLink = await condition(() => job.signals.link() !== undefined, settings.linkWaitMs);
  await records('slackClearPending', { connectionId, eventId });
  cleanup.pendingLink = false;
  // Decide on whether a link was recorded, not on how the wait ended: a link that lands in the
  // timer's activation, or while the pending row is being cleared, still routes the invocation.
  const link = job.signals.link();
  if (!link || (!gotLink && !patched(LINK_DECISION_PATCH))) {
    setStatus('link_expired');
    return null;
  }
  return { organizationId: link.organizationId, memberId: link.memberId };
}

/** Reserves one of the member's invocations within their limits: the run id, or null once told why not. */
async function reserveInvocation(job: Invocation, member: Member): Promise<string | null> {
  const { input, records, state, setStatus, cleanup } = job;
  const { connectionId, eventId, settings } = input;
  const run = settings.run;
  const reservation = await records('slackReserveInvocation', {
    connectionId,
    eventId,
    organizationId: member.organizationId,
    memberId: member.memberId,
    runId: uuid4(),
    limits: {
      dailyInvocations: settings.memberDailyInvocations,
      concurrentRuns: settings.memberConcurrentRuns,
      staleAfterMs: run.claimDeadlineMs + run.maxDurationMs + run.retryWindowMs * run.maxAttempts + 3_600_000,
    },
  });
  if (!reservation.ok) {
    setStatus('limited', reservation.limit);
    await bestEffort(() => slackApi.slackPostEphemeral({ ...job.thread, text: limitText(reservation.limit, reservation.max) }));
    return null;
  }
  state.runId = reservation.runId;
  cleanup.reserved = true;
  return reservation.runId;
}

/** The invocation's run as a child workflow: queued for the member's runtime, answering in the thread. */
function childRunOptions(job: Invocation, member: Member, runId: string, threadTs: string) {
  const { input, invocation } = job;
  const runInput: RunWorkflowInput = {
    organizationId: member.organizationId,
    runId,
    initialStatus: 'queued',
    createdAt: Date.now(),
    settings: input.settings.run,
    memberId: member.memberId,
    origin: {
      kind: 'slack',
      connectionId: input.connectionId,
      teamId: input.teamId,
      channel: invocation.channel,
      threadTs,
      slackUserId: invocation.user,
    },
    input: { text: invocation.text },
  };
  return {
    workflowId: runWorkflowId(member.organizationId, runId),
    args: [runInput] as [RunWorkflowInput],
    // The run is the member's record; it outlives this invocation if an operator ends it.
    parentClosePolicy: 'ABANDON' as const,
    workflowIdReusePolicy: 'REJECT_DUPLICATE' as const,
  };
}

/** The invocation as a queued automation run (a child workflow): its outcome, failed or not. */
async function runInvocation(
  job: Invocation,
  member: Member,
  runId: string,
  threadTs: string,
): Promise<Pick<RunSummary, 'status' | 'error' | 'lastAssistantText'>> {
  job.setStatus('run_created');
  try {
    return await executeChild(automationRun, childRunOptions(job, member, runId, threadTs));
  } catch (error) {
    // A cancel of this workflow goes to its caller, which releases the slot out of the cancel's reach.
    if (!(error instanceof ChildWorkflowFailure)) throw error;
    // A run that failed, timed out or was skipped ends its workflow Failed with its summary
    // (RUN_OUTCOME_PATCH): the invocation still did its job and answers with that outcome.
    return runSummaryOfFailure(error) ?? { status: 'failed', error: 'run_workflow_failed', lastAssistantText: null };
  }
}

/** A Slack post that failed after its retries must not fail the invocation's record. */
async function bestEffort(post: () => Promise<{ posted: boolean }>): Promise<'posted' | 'skipped' | 'failed'> {
  try {
    return (await post()).posted ? 'posted' : 'skipped';
  } catch (error) {
    if (error instanceof ActivityFailure) return 'failed';
    throw error;
  }
}

/** Before SLACK_PROGRESS_INTERVAL was part of the input (it always is in new events). */
const DEFAULT_PROGRESS_INTERVAL_MS = 3000;
/** A final edit Slack keeps rate-limiting is given up after this many waits. */
const FINAL_EDIT_TRIES = 10;

/** Where the invocation's message lives. */
interface MessageRef {
  connectionId: string;
  channel: string;
  threadTs: string;
}

/**
 * The run with its one message: started, announced at once ("Working on it…" and the Cancel
 * button), kept current while it works, and answered in place.
 */
async function runWithMessage(job: Invocation, member: Member, runId: string, threadTs: string): Promise<SlackEventState> {
  const { input, records, state, setStatus, cleanup } = job;
  const ref: MessageRef = { connectionId: input.connectionId, channel: job.invocation.channel, threadTs };
  const replyKey = workflowInfo().workflowId;
  // The run starts and the message is posted in the same workflow task: the member sees it at once.
  const [run, ts] = await Promise.all([startInvocationRun(job, member, runId, threadTs), postAccepted(ref, runId, replyKey)]);
  let done = false;
  // Kept for after the run: a cancel rejects the loop's wait while this awaits the run, and a
  // rejection nobody handles yet would fail the workflow task.
  let progressFailure: unknown;
  const progress = (ts === null ? Promise.resolve(0) : keepProgress(job, { ...ref, ts }, runId, () => done)).catch((error: unknown) => {
    progressFailure = error;
    return 0;
  });
  const summary = await outcomeOf(run);
  done = true;
  const nextAt = await progress;
  if (progressFailure !== undefined) throw progressFailure;
  // The answer is an edit too: it keeps the interval after the last one.
  const wait = editDelay(Date.now(), nextAt);
  if (wait > 0) await sleep(wait);
  await records('slackReleaseInvocation', { connectionId: input.connectionId, eventId: input.eventId });
  cleanup.reserved = false;
  state.runStatus = summary.status;
  const reply = await finishMessage(ref, ts, summary, replyKey);
  if (summary.status === 'cancelled') setStatus('cancelled', summary.error ?? 'cancel_requested');
  else setStatus(reply === 'posted' ? 'replied' : reply === 'skipped' ? 'reply_skipped' : 'reply_failed');
  return state;
}

/** "Working on it…" with the Cancel button: the message's ts, or null when nothing could be posted. */
async function postAccepted(ref: MessageRef, runId: string, replyKey: string): Promise<string | null> {
  try {
    return (await slackApi.slackPostAccepted({ ...ref, runId, replyKey })).ts ?? null;
  } catch (error) {
    if (error instanceof ActivityFailure) return null;
    throw error;
  }
}

/** The invocation's run as a child workflow, started (not awaited): the message is posted while it waits. */
async function startInvocationRun(job: Invocation, member: Member, runId: string, threadTs: string) {
  job.setStatus('run_created');
  return startChild(automationRun, childRunOptions(job, member, runId, threadTs));
}

/** The run's outcome, failed or not (as runInvocation). */
async function outcomeOf(run: { result(): Promise<RunSummary> }): Promise<Pick<RunSummary, 'status' | 'error' | 'lastAssistantText'>> {
  try {
    return await run.result();
  } catch (error) {
    if (!(error instanceof ChildWorkflowFailure)) throw error;
    return runSummaryOfFailure(error) ?? { status: 'failed', error: 'run_workflow_failed', lastAssistantText: null };
  }
}

/**
 * Edits the message with the run's newest progress until `done`: at most one edit per interval
 * (a workflow timer), later when Slack answers 429, and always the newest state; states that
 * arrive meanwhile are skipped. Stops at a message that is gone or an edit that failed. Answers
 * when the next edit may go out.
 */
async function keepProgress(job: Invocation, message: MessageRef & { ts: string }, runId: string, done: () => boolean): Promise<number> {
  const interval = job.input.settings.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS;
  let shown = 0;
  // The post itself counts as the first edit.
  let nextAt = nextEditAt(Date.now(), interval);
  for (;;) {
    await condition(() => done() || (job.signals.progress()?.sequence ?? 0) > shown);
    if (done()) return nextAt;
    const wait = editDelay(Date.now(), nextAt);
    if (wait > 0 && (await condition(done, wait))) return nextAt;
    const progress = job.signals.progress()!;
    let edit: Awaited<ReturnType<SlackActivities['slackUpdateProgress']>>;
    try {
      edit = await progressApi.slackUpdateProgress({ ...message, runId, text: progressText(progress) });
    } catch (error) {
      if (error instanceof ActivityFailure) return nextAt;
      throw error;
    }
    nextAt = nextEditAt(Date.now(), interval, edit.outcome === 'ratelimited' ? edit.retryAfterMs : 0);
    // Rate-limited: nothing shown; whatever is newest after the wait goes out then.
    if (edit.outcome === 'ratelimited') continue;
    if (edit.outcome !== 'updated') return nextAt;
    shown = progress.sequence;
  }
}

/** The answer in the message (or as new replies if it is gone); a 429 waits its Retry-After on a timer. */
async function finishMessage(
  ref: MessageRef,
  ts: string | null,
  summary: Pick<RunSummary, 'status' | 'error' | 'lastAssistantText'>,
  replyKey: string,
): Promise<'posted' | 'skipped' | 'failed'> {
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

implementsWorkflow(slackEventWorkflow, slackEvent);
