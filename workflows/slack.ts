/**
 * One Slack event, `slack-event/{connectionId}/{event_id}`. Started by the events
 * route before it acks, so the id is also the dedupe key of Slack's retries.
 *
 * - Lifecycle: app_uninstalled marks the connection uninstalled, removes its member links and ends
 *   its invocations waiting for a link (SLACK_REMOVAL_PATCH); tokens_revoked disables it.
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
  allHandlersFinished,
  continueAsNew,
  getExternalWorkflowHandle,
  log,
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
import type { DeliveryOutcome, DeliveryProgress, SlackActivities } from '../activities/slack';
import { byName, localFirst, LOCAL_POSTGRES_EFFECT, type ActivityCall } from './local-first';
import { automationRun } from './runs';
import { limitText, runReplyText } from '../src/slack/texts';
import { editDelay, newerProgress, nextEditAt, progressText, STREAMED_TEXT } from '../src/slack/progress';
import { finalMarkdown, markdownPieces, progressStep, STREAM_CALL_LIMIT, type StreamChunk } from '../src/slack/stream';
import {
  runEndedSignal,
  runProgressSignal,
  runSummaryOfFailure,
  runWorkflowId,
  type RunProgress,
  type RunSummary,
  type RunWorkflowInput,
} from '../src/runs/contract';
import {
  LINK_DECISION_PATCH,
  SLACK_ANSWER_PATCH,
  SLACK_CONTINUE_AS_NEW_PATCH,
  SLACK_LOCAL_RECORDS_PATCH,
  SLACK_PROGRESS_PATCH,
  SLACK_REMOVAL_PATCH,
  slackSearchAttributes,
  slackAccountLinkedSignal,
  slackConnectionRemovedSignal,
  slackEventStateQuery,
  type SlackAccountLinked,
  type SlackEventInput,
  type SlackEventState,
  type SlackEventStatus,
  type SlackFollowing,
  type SlackThreadView,
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
  let removed: string | undefined;
  let progress: RunProgress | null = null;
  let ended: RunSummary | undefined;
  // Continued as new while following its run: where the last execution left it.
  if (input.following) {
    Object.assign(state, input.following.state);
    progress = input.following.progress;
  }
  setHandler(slackEventStateQuery, () => state);
  setHandler(slackAccountLinkedSignal, (link) => {
    if (input.invocation && link.slackUserId === input.invocation.user && link.organizationId === input.organizationId) linked ??= link;
  });
  // The connection is gone: a wait for a link ends at once. Taken behind the patch, so an event
  // an older worker ran (which had no handler for this signal) replays the way it ran.
  setHandler(slackConnectionRemovedSignal, (gone) => {
    if (removed === undefined && patched(SLACK_REMOVAL_PATCH)) removed = gone.reason;
  });
  // Only the invocation's own run reports here; its newest report is what the message shows.
  setHandler(runProgressSignal, (report) => {
    if (report.runId === state.runId) progress = newerProgress(progress, report);
  });
  // The run's summary, from a run that tells its end (RUN_TELLS_END_PATCH).
  setHandler(runEndedSignal, (summary) => {
    if (summary.id === state.runId) ended ??= summary;
  });
  const setStatus = (status: SlackEventStatus, detail: string | null = null) => {
    state.status = status;
    state.detail = detail;
    upsertSearchAttributes([{ key: slackSearchAttributes.SlackEventStatus, value: status }]);
  };
  const cleanup: Cleanup = { pendingLink: false, reserved: input.following !== undefined };
  try {
    const signals: Signals = { link: () => linked, removed: () => removed, progress: () => progress, ended: () => ended };
    return await handle(input, records, state, setStatus, signals, cleanup);
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
      // Continued as new, the run is no longer this execution's child: the cancel is passed on.
      if (input.following && ended === undefined) await cancelRun(input.following);
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

/** What the signals brought: the link an invocation waits for, its connection's removal, the run's newest progress and its end. */
interface Signals {
  link: () => SlackAccountLinked | undefined;
  removed: () => string | undefined;
  progress: () => RunProgress | null;
  ended: () => RunSummary | undefined;
}

/** A run this invocation no longer holds as a child is asked to stop; one already gone needs nothing. */
async function cancelRun(following: SlackFollowing): Promise<void> {
  const { organizationId } = following.member;
  await getExternalWorkflowHandle(runWorkflowId(organizationId, following.runId))
    .cancel()
    .catch(() => undefined);
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
    if (input.lifecycle.type === 'app_uninstalled' && patched(SLACK_REMOVAL_PATCH)) {
      await records('slackUninstallConnection', { connectionId: input.connectionId });
    } else {
      await records('slackDisableConnection', { connectionId: input.connectionId, reason: input.lifecycle.type });
    }
    setStatus('connection_disabled', input.lifecycle.type);
    return state;
  }
  const invocation = input.invocation;
  if (!invocation) return state;
  const thread = { connectionId: input.connectionId, channel: invocation.channel, user: invocation.user, threadTs: invocation.threadTs };
  const job: Invocation = { input, invocation, records, state, setStatus, signals, cleanup, thread };
  if (input.following) return followAndAnswer(job, input.following);

  // 1. Who is asking: the linked member, or wait for the link.
  const member = await findMember(job);
  if (!member) return state;
  state.memberId = member.memberId;

  // 2. The member's limits.
  const runId = await reserveInvocation(job, member);
  if (runId === null) return state;

  // 3. The run: queued until the member's runtime claims it.
  const threadTs = invocation.threadTs ?? invocation.ts;
  if (patched(SLACK_PROGRESS_PATCH)) {
    return patched(SLACK_ANSWER_PATCH) ? runAndAnswer(job, member, runId, threadTs) : runWithMessage(job, member, runId, threadTs);
  }
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
  const member = await records('slackLinkOrWait', {
    connectionId,
    slackUserId: invocation.user,
    eventId,
    workflowId: workflowInfo().workflowId,
    waitMs: settings.linkWaitMs,
  });
  if (member && 'removed' in member && patched(SLACK_REMOVAL_PATCH)) {
    setStatus('connection_removed', member.removed);
    return null;
  }
  if (member) return member as Member;
  cleanup.pendingLink = true;
  setStatus('awaiting_link');
  await bestEffort(() => slackApi.slackPostConnectPrompt({ ...job.thread, waitMs: settings.linkWaitMs }));
  const gotLink = await condition(() => job.signals.link() !== undefined || job.signals.removed() !== undefined, settings.linkWaitMs);
  await records('slackClearPending', { connectionId, eventId });
  cleanup.pendingLink = false;
  // Decide on whether a link was recorded, not on how the wait ended: a link that lands in the
  // timer's activation, or while the pending row is being cleared, still routes the invocation.
  const link = job.signals.link();
  const gone = job.signals.removed();
  if (!link && gone !== undefined) {
    setStatus('connection_removed', gone);
    return null;
  }
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
  if (!reservation.ok && 'removed' in reservation && patched(SLACK_REMOVAL_PATCH)) {
    setStatus('connection_removed', reservation.removed);
    return null;
  }
  if (!reservation.ok) {
    const limited = reservation as Extract<typeof reservation, { limit: string }>;
    setStatus('limited', limited.limit);
    // In the thread the member asked in, never in the channel.
    const thread = { ...job.thread, threadTs: job.invocation.threadTs ?? job.invocation.ts };
    await bestEffort(() => slackApi.slackPostEphemeral({ ...thread, text: limitText(limited.limit, limited.max) }));
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
    // The run tells this workflow at most one progress per interval, no more text than a stream call takes.
    progress: { intervalMs: input.settings.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS, maxChars: STREAM_CALL_LIMIT },
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
  // Edits only, as before streaming: the same calls the edit path of keepThreadCurrent makes.
  const view: ThreadView = { ts, streaming: false, force: false, stream: null, streamOff: false };
  const progress = (ts === null ? Promise.resolve(0) : keepThreadCurrent(job, view, runId, () => done).then((at) => at.nextAt)).catch(
    (error: unknown) => {
      progressFailure = error;
      return 0;
    },
  );
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
async function postAccepted(ref: MessageRef, runId: string, replyKey: string, since?: number): Promise<string | null> {
  try {
    return (await slackApi.slackPostAccepted({ ...ref, runId, replyKey, ...(since === undefined ? {} : { since }) })).ts ?? null;
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

/** What the thread shows while the run works: the first message, and the answer's stream once one is open. */
type ThreadView = SlackThreadView;

/**
 * The run with its thread (SLACK_ANSWER_PATCH): "Working on it…" with the Cancel button at once,
 * the progress streamed in a reply (or edited into the message), the member's slot freed as soon
 * as the run closes, and the answer delivered so that it always lands.
 */
async function runAndAnswer(job: Invocation, member: Member, runId: string, threadTs: string): Promise<SlackEventState> {
  const { input, state } = job;
  const ref: MessageRef = { connectionId: input.connectionId, channel: job.invocation.channel, threadTs };
  const replyKey = workflowInfo().workflowId;
  const since = Date.now();
  const [run, ts] = await Promise.all([startInvocationRun(job, member, runId, threadTs), postAccepted(ref, runId, replyKey, since)]);
  const mode = input.settings.replyMode ?? 'edit';
  const view: ThreadView = { ts, streaming: mode !== 'edit', force: mode === 'stream', stream: null, streamOff: false };
  const at = { shown: 0, nextAt: nextEditAt(Date.now(), progressInterval(job)) };
  return followAndAnswer(job, { member, runId, threadTs, replyKey, view, ...at, progress: null, state }, outcomeOf(run));
}

/**
 * Follows the run to its end, keeping the thread current, then answers. `child`: the run's
 * outcome while it is this execution's child; after a continue-as-new, its end comes as a signal.
 */
async function followAndAnswer(job: Invocation, following: SlackFollowing, child?: Promise<Summary>): Promise<SlackEventState> {
  const { input, records, state, setStatus, cleanup } = job;
  const { runId, view, replyKey } = following;
  const ref: MessageRef = { connectionId: input.connectionId, channel: job.invocation.channel, threadTs: following.threadTs };
  let done = false;
  let progressFailure: unknown;
  const from = { shown: following.shown, nextAt: following.nextAt };
  const watching = (
    view.ts === null ? Promise.resolve({ shown: 0, nextAt: 0 }) : keepThreadCurrent(job, view, runId, () => done, from)
  ).catch((error: unknown) => {
    progressFailure = error;
    return { shown: 0, nextAt: 0 };
  });
  const childEnd = child?.then(
    (summary) => ({ summary }),
    (error: unknown) => ({ error }),
  );
  let summary = await awaitEnd(job, childEnd);
  if (summary === 'continue') {
    done = true;
    const at = await watching;
    if (progressFailure !== undefined) throw progressFailure;
    // No signal may be lost across continue-as-new; an end that came meanwhile is answered here.
    await condition(allHandlersFinished);
    const settled = job.signals.ended() ?? (await settledChild(childEnd));
    if (settled === undefined) {
      const carried: SlackFollowing = { ...following, ...at, progress: job.signals.progress(), state: { ...state } };
      return continueAsNew<typeof slackEvent>({ ...input, following: carried });
    }
    summary = settled;
  }
  done = true;
  // The slot is the member's while the run runs, no longer: freed before the answer goes out.
  await records('slackReleaseInvocation', { connectionId: input.connectionId, eventId: input.eventId });
  cleanup.reserved = false;
  state.runStatus = summary.status;
  const { nextAt } = await watching;
  if (progressFailure !== undefined) throw progressFailure;
  const wait = editDelay(Date.now(), nextAt);
  if (wait > 0) await sleep(wait);
  const deadline = Date.now() + (input.settings.finalDeliveryDeadlineMs ?? 3_600_000);
  const reply = await deliverFinal(ref, view, summary, { replyKey, since: Date.now(), deadline });
  if (summary.status === 'cancelled' && reply.result !== 'failed') setStatus('cancelled', summary.error ?? 'cancel_requested');
  else if (reply.result === 'failed') {
    log.warn('slack answer not delivered', { runId, why: reply.why });
    setStatus('reply_failed', reply.why ?? 'failed');
  } else setStatus(reply.result === 'posted' ? 'replied' : 'reply_skipped');
  return state;
}

type ChildEnd = Promise<{ summary: Summary } | { error: unknown }>;

/**
 * The run's end: its child outcome (awaited as always, so a cancel still waits for the child to
 * close), its ended signal, or `continue` once the history is due to continue as new
 * (SLACK_CONTINUE_AS_NEW_PATCH), which only a run that tells its end allows.
 */
async function awaitEnd(job: Invocation, childEnd: ChildEnd | undefined): Promise<Summary | 'continue'> {
  let mayContinue = true;
  const due = () => mayContinue && job.signals.progress()?.tellsEnd === true && continueDue(job.input);
  const signalled = () => job.signals.ended() !== undefined || due();
  for (;;) {
    if (childEnd === undefined) await condition(signalled);
    else {
      // The wait for a signal is out of the cancel's reach: a cancel ends this wait through the child.
      const first = await Promise.race([childEnd, CancellationScope.nonCancellable(() => condition(signalled)).then(() => null)]);
      if (first !== null) {
        if ('error' in first) throw first.error;
        return first.summary;
      }
    }
    const ended = job.signals.ended();
    if (ended !== undefined) return ended;
    if (patched(SLACK_CONTINUE_AS_NEW_PATCH)) return 'continue';
    // A history that ran without the patch: its run's end is the only way out, as it was.
    mayContinue = false;
  }
}

/** The child's outcome if it has settled already (awaited within this activation), else undefined. */
async function settledChild(childEnd: ChildEnd | undefined): Promise<Summary | undefined> {
  if (childEnd === undefined) return undefined;
  const first = await Promise.race([childEnd, Promise.resolve(null)]);
  if (first === null) return undefined;
  if ('error' in first) throw first.error;
  return first.summary;
}

/** Past the stated history length (SLACK_CONTINUE_AS_NEW_EVENTS), or when Temporal suggests it. */
function continueDue(input: SlackEventInput): boolean {
  const info = workflowInfo();
  return info.continueAsNewSuggested || info.historyLength >= (input.settings.continueAsNewEvents ?? DEFAULT_CONTINUE_AS_NEW_EVENTS);
}

/** The history length past which an invocation that follows its run continues as new, when its event did not say. */
const DEFAULT_CONTINUE_AS_NEW_EVENTS = 4_000;

const progressInterval = (job: Invocation) => job.input.settings.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS;

/**
 * Keeps the thread current with the run's newest progress until `done`: streamed into a reply
 * (chat.startStream at the first report, chat.appendStream after) while Slack takes it, else
 * edited into the first message; at most one call per interval, later when Slack or the budget
 * asks for a wait, always the newest state. Answers when the next call may go out.
 */
async function keepThreadCurrent(
  job: Invocation,
  view: ThreadView,
  runId: string,
  done: () => boolean,
  from?: { shown: number; nextAt: number },
): Promise<{ shown: number; nextAt: number }> {
  const interval = progressInterval(job);
  const message = {
    connectionId: job.input.connectionId,
    channel: job.invocation.channel,
    threadTs: job.invocation.threadTs ?? job.invocation.ts,
  };
  let shown = from?.shown ?? 0;
  let nextAt = from?.nextAt ?? nextEditAt(Date.now(), interval);
  for (;;) {
    await condition(() => done() || (job.signals.progress()?.sequence ?? 0) > shown);
    if (done()) return { shown, nextAt };
    const wait = editDelay(Date.now(), nextAt);
    if (wait > 0 && (await condition(done, wait))) return { shown, nextAt };
    const progress = job.signals.progress()!;
    let step: ProgressStep;
    try {
      step =
        view.streaming && !view.streamOff
          ? await streamProgress(job, view, message, progress)
          : await editProgress(view, message, runId, progress);
    } catch (error) {
      if (error instanceof ActivityFailure) return { shown, nextAt };
      throw error;
    }
    nextAt = nextEditAt(Date.now(), interval, step.retryAfterMs ?? 0);
    if (step.stop) return { shown, nextAt };
    if (step.shown) shown = progress.sequence;
  }
}

/** What one progress step did: shown, to wait for, or the end of progress for this message. */
interface ProgressStep {
  shown?: boolean;
  retryAfterMs?: number;
  stop?: boolean;
}

async function editProgress(view: ThreadView, message: MessageRef, runId: string, progress: RunProgress): Promise<ProgressStep> {
  const edit = await progressApi.slackUpdateProgress({ ...message, ts: view.ts!, runId, text: progressText(progress) });
  if (edit.outcome === 'ratelimited') return { retryAfterMs: edit.retryAfterMs };
  return edit.outcome === 'updated' ? { shown: true } : { stop: true };
}

/** One progress step as a stream: opened at the first report, appended after; refused or broken, edits take over. */
async function streamProgress(job: Invocation, view: ThreadView, message: MessageRef, progress: RunProgress): Promise<ProgressStep> {
  if (view.stream === null) {
    const dm = job.invocation.channelType === 'im' || job.invocation.channel.startsWith('D');
    const started = await progressApi.slackStartStream({
      ...message,
      recipient: dm ? null : { userId: job.invocation.user, teamId: job.input.teamId },
      force: view.force,
      chunks: [],
    });
    if (started.outcome === 'ratelimited') return { retryAfterMs: started.retryAfterMs };
    if (started.outcome !== 'ok' || started.ts === undefined) {
      view.streamOff = true;
      return {};
    }
    view.stream = { ts: started.ts, streamed: { source: '' }, openTask: null };
  }
  const stream = view.stream;
  const next = progressStep(stream.streamed, progress, stream.openTask);
  const pieces = next.append === '' ? [] : markdownPieces(next.append);
  for (const [index, piece] of (pieces.length > 0 ? pieces : ['']).entries()) {
    const chunks: StreamChunk[] = index === 0 ? next.chunks : [];
    if (piece === '' && chunks.length === 0) break;
    const appended = await progressApi.slackAppendStream({
      ...message,
      streamTs: stream.ts,
      markdown: piece,
      chunks,
      priority: 'progress',
    });
    if (appended.outcome === 'ratelimited') return { retryAfterMs: appended.retryAfterMs };
    if (appended.outcome !== 'ok') {
      view.streamOff = true;
      return {};
    }
  }
  view.stream = { ts: stream.ts, streamed: next.streamed, openTask: next.openTask };
  return { shown: true };
}

type FinalResult = { result: 'posted' | 'skipped' | 'failed'; why?: string };
type Summary = Pick<RunSummary, 'status' | 'error' | 'lastAssistantText'>;

/**
 * The answer: the stream closed with the rest of it and the outcome, and the first message's
 * Cancel button gone; or, without a stream (or one Slack broke), the answer delivered by edit or
 * as new replies (deliverAnswer).
 */
async function deliverFinal(
  ref: MessageRef,
  view: ThreadView,
  summary: Summary,
  at: { replyKey: string; since: number; deadline: number },
): Promise<FinalResult> {
  const markdown = summary.status === 'succeeded' && !!summary.lastAssistantText?.trim();
  const answer = { text: markdown ? summary.lastAssistantText! : runReplyText(summary), markdown };
  if (view.stream !== null && !view.streamOff) {
    const stopped = await stopStream(ref, view.stream, summary, at.deadline);
    if (stopped.result !== 'fallback') {
      if (stopped.result !== 'posted' || view.ts === null) return stopped;
      const status = summary.status === 'succeeded' ? STREAMED_TEXT : runReplyText({ ...summary, lastAssistantText: null });
      await deliverAnswer(ref, view.ts, { text: status, markdown: false }, { ...at, replyKey: `${at.replyKey}/status` });
      return stopped;
    }
  }
  return deliverAnswer(ref, view.ts, answer, at);
}

/** chat.stopStream with the rest of the answer; rate limits wait until the deadline; a stream Slack lost falls back to replies. */
async function stopStream(
  ref: MessageRef,
  stream: NonNullable<ThreadView['stream']>,
  summary: Summary,
  deadline: number,
): Promise<FinalResult | { result: 'fallback' }> {
  const markdown = finalMarkdown(stream.streamed, summary);
  const chunks: StreamChunk[] = stream.openTask ? [{ type: 'task_update', id: stream.openTask, title: 'Done', status: 'complete' }] : [];
  let from = 0;
  for (;;) {
    let step: Awaited<ReturnType<SlackActivities['slackStopStream']>>;
    try {
      step = await slackApi.slackStopStream({
        connectionId: ref.connectionId,
        channel: ref.channel,
        streamTs: stream.ts,
        markdown,
        from,
        chunks,
      });
    } catch (error) {
      if (error instanceof ActivityFailure) return { result: 'fallback' };
      throw error;
    }
    if (step.outcome === 'ok') return { result: 'posted' };
    if (step.outcome === 'skipped') return { result: 'skipped' };
    if (step.outcome !== 'ratelimited') return { result: 'fallback' };
    from = 'from' in step ? step.from : from;
    if (Date.now() + step.retryAfterMs > deadline) return { result: 'fallback' };
    await sleep(step.retryAfterMs);
  }
}

/** Between two tries of a final delivery that Slack kept failing (5xx, timeouts), once its activity's own retries are spent. */
const FINAL_RETRY_PAUSE_MS = 60_000;

/**
 * The answer by slackDeliverAnswer, until it lands or the deadline passes: rate limits and the
 * budget wait on timers; an edit Slack keeps failing gives way to new replies. Never silent: a
 * failure says why.
 */
async function deliverAnswer(
  ref: MessageRef,
  ts: string | null,
  answer: { text: string; markdown: boolean },
  at: { replyKey: string; since: number; deadline: number },
): Promise<FinalResult> {
  let progress: DeliveryProgress = { edited: false, asReplies: false, posted: 0, superseded: false };
  let again = false;
  for (;;) {
    let out: DeliveryOutcome;
    try {
      out = await slackApi.slackDeliverAnswer({ ...ref, ts, ...answer, replyKey: at.replyKey, since: at.since, again, progress });
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      if (Date.now() + FINAL_RETRY_PAUSE_MS > at.deadline) return { result: 'failed', why: 'slack_unavailable_until_deadline' };
      if (!progress.edited) progress = { ...progress, asReplies: true };
      again = true;
      await sleep(FINAL_RETRY_PAUSE_MS);
      continue;
    }
    if (out.outcome === 'delivered') return { result: 'posted' };
    if (out.outcome === 'skipped') return { result: 'skipped' };
    if (out.outcome === 'failed') return { result: 'failed', why: out.error };
    progress = out.progress;
    if (Date.now() + out.retryAfterMs > at.deadline) return { result: 'failed', why: 'rate_limited_until_deadline' };
    await sleep(out.retryAfterMs);
  }
}

implementsWorkflow(slackEventWorkflow, slackEvent);
