/**
 * What an invocation does before and beside its run, beyond answering (workflows/slack-answer.ts):
 *
 * - The thread as a conversation (SLACK_CONVERSATION_PATCH): a follow-up waits while a request
 *   ahead of it in its thread is unfinished, and the thread says it is queued; the run carries the
 *   thread's earlier messages as its context; an assistant thread (the app's DM) shows the run's
 *   status while it works and gets its title from its first ask.
 * - The member's runtime (SLACK_RUNTIME_GATE_PATCH): a paused member (their breaker open, or a
 *   probe already under way) is told so privately and gets no run; a member without a runtime
 *   online gets a first message that says so, which becomes the usual progress once a runtime
 *   claims the run.
 * - A surface a member opened: the app thread's suggested prompts, or their Home tab.
 *
 * Whether an event takes these is decided in workflows/slack-legacy.ts.
 */
import { ActivityFailure, condition, workflowInfo } from '@temporalio/workflow';
import type { RunContextMessage } from '../src/runs/contract';
import { threadTitle } from '../src/slack/assistant';
import type { SlackEventInput, SlackEventState, SlackEventStatus, SlackFollowing } from '../src/slack/contract';
import { runReplyText } from '../src/slack/texts';
import { takesConversation, takesRuntimeGate } from './slack-legacy';
import {
  bestEffort,
  postAccepted,
  slackApi,
  staleReservationMs,
  type Invocation,
  type MessageRef,
  type ReservedRun,
  type RunOpening,
  type RunOutcome,
} from './slack-invocation';

/** A queued follow-up looks again this often whether its turn came, should the signal that says so be lost. */
const TURN_RECHECK_MS = 120_000;

/** A DM with the app: its thread is an assistant thread (status line, title, suggested prompts). */
const inAssistantThread = (invocation: Invocation['invocation']) => invocation.channelType === 'im' || invocation.channel.startsWith('D');

/**
 * What the run opens with, decided before it starts: its turn in the thread, its context, its
 * member's breaker and runtime. Null once the invocation ended without a run (its member paused).
 */
export async function openRun(job: Invocation, run: ReservedRun & { openedThread: boolean }): Promise<RunOpening | null> {
  const opening: RunOpening = {};
  const { invocation } = job;
  if (takesConversation()) {
    if (invocation.followUp) opening.posted = await awaitTurn(job, run);
    if (run.threadTs !== invocation.ts) opening.context = await threadContextOf(job, run);
    if (inAssistantThread(invocation)) opening.assistant = { title: run.openedThread ? threadTitle(invocation.text) : null };
  }
  if (takesRuntimeGate()) {
    const { organizationId, memberId } = run.member;
    const gate = await job.records('slackRunGate', { organizationId, memberId, runId: run.runId });
    if (!gate.start) {
      await endPaused(job, run, { phase: gate.phase, notice: gate.notice, posted: opening.posted });
      return null;
    }
    if (!gate.online)
      opening.notice = { kind: 'no_runtime', claimDeadlineMs: job.input.settings.run.claimDeadlineMs, lastSeenAt: gate.lastSeenAt };
  }
  return opening;
}

/**
 * Waits while a request ahead of this one in its thread is unfinished: told by a signal when one
 * ends, and looking again now and then all the same. The thread says it is queued (a message that
 * becomes the request's own once it starts): its ts, null if it could not be posted, undefined if
 * the request did not wait.
 */
async function awaitTurn(job: Invocation, run: ReservedRun): Promise<string | null | undefined> {
  const { connectionId, eventId, settings } = job.input;
  const ref: MessageRef = { connectionId, channel: job.invocation.channel, threadTs: run.threadTs };
  let posted: string | null | undefined;
  for (;;) {
    const seen = job.signals.turns();
    const ahead = await job.records('slackRequestAhead', { connectionId, eventId, staleAfterMs: staleReservationMs(settings.run) });
    if (ahead === null) return posted;
    if (posted === undefined) {
      job.setStatus('received', 'queued');
      posted = await postAccepted(ref, { runId: run.runId, replyKey: workflowInfo().workflowId, notice: { kind: 'queued' } });
    }
    await condition(() => job.signals.turns() > seen, TURN_RECHECK_MS);
  }
}

/** The thread's earlier messages; a failure of the activity gives none, never a lost request. */
async function threadContextOf(job: Invocation, run: ReservedRun): Promise<RunContextMessage[]> {
  try {
    return await slackApi.slackThreadContext({
      connectionId: job.input.connectionId,
      channel: job.invocation.channel,
      threadTs: run.threadTs,
      ts: job.invocation.ts,
    });
  } catch (error) {
    if (error instanceof ActivityFailure) return [];
    throw error;
  }
}

/** A paused member's request: told privately why and until when, its queued message closed, its slot freed, no run. */
async function endPaused(
  job: Invocation,
  run: ReservedRun,
  paused: { phase: 'open' | 'half_open'; notice: string; posted: string | null | undefined },
): Promise<void> {
  const { input, invocation, records, cleanup } = job;
  const thread = { ...job.thread, threadTs: run.threadTs };
  await bestEffort(() => slackApi.slackPostEphemeral({ ...thread, text: paused.notice }));
  if (paused.posted) {
    const ref = { connectionId: input.connectionId, channel: invocation.channel, threadTs: run.threadTs };
    const text = 'This request did not start: your requests are paused (a note only you can see says why).';
    await bestEffort(async () => ({
      posted:
        (await slackApi.slackFinishMessage({ ...ref, ts: paused.posted!, text, markdown: false, replyKey: workflowInfo().workflowId }))
          .outcome !== 'skipped',
    }));
  }
  await records('slackReleaseInvocation', { connectionId: input.connectionId, eventId: input.eventId });
  cleanup.reserved = false;
  job.setStatus('paused', paused.phase);
}

// ─── The assistant thread's status and title ──────────────────────────────────────────────────

/** A status or title call that failed after its retries changes nothing else. */
async function quietly(call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
  } catch (error) {
    if (!(error instanceof ActivityFailure)) throw error;
  }
}

/** The run started: the thread shows that it works, and, on its first ask, gets its title. */
export async function assistantOpened(job: Invocation, following: SlackFollowing, title: string | null): Promise<void> {
  const thread = { connectionId: job.input.connectionId, channel: job.invocation.channel, threadTs: following.threadTs };
  await quietly(() => slackApi.slackAssistantStatus(thread));
  if (title !== null) await quietly(() => slackApi.slackAssistantTitle({ ...thread, title }));
}

/** The run uses another tool: the status line says which. */
export async function assistantProgress(job: Invocation, following: SlackFollowing, tool: string | undefined): Promise<void> {
  const assistant = following.assistant;
  if (assistant === undefined || tool === undefined || tool === assistant.tool) return;
  assistant.tool = tool;
  const thread = { connectionId: job.input.connectionId, channel: job.invocation.channel, threadTs: following.threadTs };
  await quietly(() => slackApi.slackAssistantStatus({ ...thread, tool }));
}

/** The answer landed: the status line is cleared. */
export async function assistantEnded(job: Invocation, following: SlackFollowing): Promise<void> {
  if (following.assistant === undefined) return;
  const thread = { connectionId: job.input.connectionId, channel: job.invocation.channel, threadTs: following.threadTs };
  await quietly(() => slackApi.slackAssistantStatus({ ...thread, clear: true }));
}

/** The answer as the thread's message, for the next request's context: where it shows (the stream, else the first message), and its text. */
export function answerRecord(job: Invocation, following: SlackFollowing, summary: RunOutcome) {
  const ts = following.view.stream?.ts ?? following.view.ts;
  if (ts === null) return {};
  const text = summary.status === 'succeeded' && summary.lastAssistantText?.trim() ? summary.lastAssistantText : runReplyText(summary);
  return { answer: { connectionId: job.input.connectionId, channel: job.invocation.channel, threadTs: following.threadTs, ts, text } };
}

// ─── A surface a member opened ────────────────────────────────────────────────────────────────

/** The app thread's suggested prompts, or the member's Home tab, published; the event's status says how it went. */
export async function publishSurface(
  input: SlackEventInput & { surface: NonNullable<SlackEventInput['surface']> },
  state: SlackEventState,
  setStatus: (status: SlackEventStatus, detail?: string | null) => void,
): Promise<SlackEventState> {
  let outcome: string;
  try {
    outcome = await slackApi.slackPublishSurface({ connectionId: input.connectionId, teamId: input.teamId, surface: input.surface });
  } catch (error) {
    if (!(error instanceof ActivityFailure)) throw error;
    outcome = 'failed';
  }
  if (outcome === 'ok') setStatus('replied');
  else setStatus(outcome === 'failed' ? 'reply_failed' : 'reply_skipped', outcome);
  return state;
}
