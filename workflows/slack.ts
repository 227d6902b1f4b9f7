/**
 * One Slack event, `slack-event/{connectionId}/{event_id}` (or one message that asks,
 * `slack-message/{connectionId}/{channel}/{ts}`, where Slack may deliver it twice). Started by the
 * events route before it acks, so the id is also the dedupe key of Slack's retries. This module holds the workflow's
 * handlers, the member lookup and the reservation:
 *
 * - Lifecycle: `app_uninstalled` marks the connection uninstalled, removes its member links and
 *   ends its invocations waiting for a link; `tokens_revoked` disables it.
 * - Invocation (app_mention, DM, a follow-up in a thread): find the Slack user's member, or hold
 *   the invocation for SLACK_LINK_WAIT while an ephemeral message offers a connect link (once per
 *   thread); apply the member's limits; wait its turn in the thread, gather the thread's context,
 *   ask the member's breaker and runtime (workflows/slack-conversation.ts); then run it as a queued
 *   automation run (a child workflow) for the member's runtime to claim, and answer in the thread
 *   (workflows/slack-answer.ts: the answer streams by default, or edits one message).
 * - Surface (the app's thread or Home tab opened): its suggested prompts or the Home tab, published.
 *
 * What only histories recorded before a patch still take is in workflows/slack-legacy.ts.
 */
import {
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  setHandler,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { limitText } from '../src/slack/texts';
import { newerProgress } from '../src/slack/progress';
import {
  runClaimedSignal,
  runEndedSignal,
  runProgressSignal,
  runWorkflowId,
  type RunProgress,
  type RunSummary,
} from '../src/runs/contract';
import {
  slackSearchAttributes,
  slackAccountLinkedSignal,
  slackConnectionRemovedSignal,
  slackEventStateQuery,
  slackEventWorkflow,
  slackThreadTurnSignal,
  type SlackAccountLinked,
  type SlackEventInput,
  type SlackEventState,
  type SlackEventStatus,
  type SlackFollowing,
} from '../src/slack/contract';
import { implementsWorkflow } from '../src/app/temporal/contract';
import { answerInThread, ThreadAnswer } from './slack-answer';
import { eventRecords, linkTimeoutExpires, takesConnectionRemoval } from './slack-legacy';
import { openRun, publishSurface } from './slack-conversation';
import {
  bestEffort,
  regularRecords,
  slackApi,
  staleReservationMs,
  type Cleanup,
  type Invocation,
  type Member,
  type Signals,
} from './slack-invocation';

export async function slackEvent(input: SlackEventInput): Promise<SlackEventState> {
  const records = eventRecords();
  const state: SlackEventState = { status: 'received', memberId: null, runId: null, runStatus: null, detail: null };
  let linked: SlackAccountLinked | undefined;
  let removed: string | undefined;
  let progress: RunProgress | null = null;
  let ended: RunSummary | undefined;
  let claimed = false;
  let turns = 0;
  // Continued as new while following its run: where the last execution left it.
  if (input.following) {
    Object.assign(state, input.following.state);
    progress = input.following.progress;
  }
  setHandler(slackEventStateQuery, () => state);
  setHandler(slackAccountLinkedSignal, (link) => {
    if (input.invocation && link.slackUserId === input.invocation.user && link.organizationId === input.organizationId) linked ??= link;
  });
  // The connection is gone: a wait for a link ends at once (an event an older worker ran, which
  // had no handler for this signal, replays the way it ran).
  setHandler(slackConnectionRemovedSignal, (gone) => {
    if (removed === undefined && takesConnectionRemoval()) removed = gone.reason;
  });
  // Only the invocation's own run reports here; its newest report is what the message shows.
  setHandler(runProgressSignal, (report) => {
    if (report.runId === state.runId) progress = newerProgress(progress, report);
  });
  // The run's summary, from a run that tells its end (RUN_TELLS_END_PATCH).
  setHandler(runEndedSignal, (summary) => {
    if (summary.id === state.runId) ended ??= summary;
  });
  // A runtime claimed the run (RUN_TELLS_CLAIM_PATCH): a "no runtime" first message becomes progress.
  setHandler(runClaimedSignal, (claim) => {
    if (claim.runId === state.runId) claimed = true;
  });
  // A request of the thread ended: a queued follow-up looks again whether its turn came.
  setHandler(slackThreadTurnSignal, () => {
    turns += 1;
  });
  const setStatus = (status: SlackEventStatus, detail: string | null = null) => {
    state.status = status;
    state.detail = detail;
    upsertSearchAttributes([{ key: slackSearchAttributes.SlackEventStatus, value: status }]);
  };
  const cleanup: Cleanup = { pendingLink: false, reserved: input.following !== undefined };
  try {
    const signals: Signals = {
      link: () => linked,
      removed: () => removed,
      progress: () => progress,
      ended: () => ended,
      claimed: () => claimed,
      turns: () => turns,
    };
    return await handle({ input, records, state, setStatus, signals, cleanup });
  } catch (error) {
    if (!isCancellation(error)) throw error;
    // Cancelled: the run child got the cancel too and closed `cancelled` (the default
    // child cancellation waits for that); nothing of the member's may stay held.
    // Regular activities here, even where the records are local: done locally, the cleanup
    // and the completion would share the cancel's workflow task, and an activity the cancel left
    // running (the connect prompt) that reports back meanwhile makes Temporal refuse that
    // completion (a workflow task failed with UnhandledCommand, retried, but shown to operators).
    await CancellationScope.nonCancellable(async () => {
      const { connectionId, eventId } = input;
      // Continued as new, the run is no longer this execution's child: the cancel is passed on.
      if (input.following && ended === undefined) await cancelFollowedRun(input.following);
      if (cleanup.pendingLink) await regularRecords('slackClearPending', { connectionId, eventId });
      if (cleanup.reserved) await regularRecords('slackReleaseInvocation', { connectionId, eventId });
    });
    setStatus('cancelled', 'cancel_requested');
    return state;
  }
}

/** A run this invocation no longer holds as a child is asked to stop; one already gone needs nothing. */
async function cancelFollowedRun(following: SlackFollowing): Promise<void> {
  const { organizationId } = following.member;
  await getExternalWorkflowHandle(runWorkflowId(organizationId, following.runId))
    .cancel()
    .catch(() => undefined);
}

/** One event's context, before it is known to be an invocation. */
type EventContext = Omit<Invocation, 'invocation' | 'thread'>;

async function handle(event: EventContext): Promise<SlackEventState> {
  const { input, records, state, setStatus } = event;
  if (input.lifecycle) {
    if (input.lifecycle.type === 'app_uninstalled' && takesConnectionRemoval()) {
      await records('slackUninstallConnection', { connectionId: input.connectionId });
    } else {
      await records('slackDisableConnection', { connectionId: input.connectionId, reason: input.lifecycle.type });
    }
    setStatus('connection_disabled', input.lifecycle.type);
    return state;
  }
  if (input.surface) return publishSurface({ ...input, surface: input.surface }, state, setStatus);
  const invocation = input.invocation;
  if (!invocation) return state;
  const thread = { connectionId: input.connectionId, channel: invocation.channel, user: invocation.user, threadTs: invocation.threadTs };
  const job: Invocation = { ...event, invocation, thread };
  if (input.following) return new ThreadAnswer(job, input.following).followAndAnswer();

  // 1. Who is asking: the linked member, or wait for the link.
  const member = await findMember(job);
  if (!member) return state;
  state.memberId = member.memberId;

  // 2. The member's limits.
  const reserved = await reserveInvocation(job, member);
  if (reserved === null) return state;
  const run = { member, runId: reserved.runId, threadTs: invocation.threadTs ?? invocation.ts };

  // 3. Its turn in the thread, its context, the member's breaker and runtime.
  const opening = await openRun(job, { ...run, openedThread: reserved.openedThread });
  if (opening === null) return state;

  // 4. The run, queued until the member's runtime claims it, and the answer in the thread.
  return answerInThread(job, { ...run, opening });
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
    thread: { connectionId, channel: invocation.channel, threadTs: invocation.threadTs ?? invocation.ts },
  });
  if (member && 'removed' in member && takesConnectionRemoval()) {
    setStatus('connection_removed', member.removed);
    return null;
  }
  if (member && !('held' in member)) return member as Member;
  cleanup.pendingLink = true;
  setStatus('awaiting_link');
  // Once per thread: a user already asked to link in this thread is not asked again.
  const promptedBefore = member !== null && 'held' in member && member.prompted;
  if (!promptedBefore) await bestEffort(() => slackApi.slackPostConnectPrompt({ ...job.thread, waitMs: settings.linkWaitMs }));
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
  if (!link || linkTimeoutExpires(gotLink)) {
    setStatus('link_expired');
    return null;
  }
  return { organizationId: link.organizationId, memberId: link.memberId };
}

/**
 * Reserves one of the member's invocations within their limits, as a request of its thread: the
 * run id and whether it opened the thread, or null once told why not.
 */
async function reserveInvocation(job: Invocation, member: Member): Promise<{ runId: string; openedThread: boolean } | null> {
  const { input, invocation, records, state, setStatus, cleanup } = job;
  const { connectionId, eventId, settings } = input;
  const reservation = await records('slackReserveInvocation', {
    connectionId,
    eventId,
    organizationId: member.organizationId,
    memberId: member.memberId,
    runId: uuid4(),
    limits: {
      dailyInvocations: settings.memberDailyInvocations,
      concurrentRuns: settings.memberConcurrentRuns,
      staleAfterMs: staleReservationMs(settings.run),
    },
    thread: {
      connectionId,
      channel: invocation.channel,
      threadTs: invocation.threadTs ?? invocation.ts,
      ts: invocation.ts,
      text: invocation.text,
      slackUserId: invocation.user,
      workflowId: workflowInfo().workflowId,
    },
  });
  if (!reservation.ok && 'removed' in reservation && takesConnectionRemoval()) {
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
  return { runId: reservation.runId, openedThread: reservation.openedThread === true };
}

implementsWorkflow(slackEventWorkflow, slackEvent);
