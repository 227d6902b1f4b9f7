/**
 * How an invocation answers in its thread, once its member and slot are known: "Working on it…"
 * with a Cancel button at once, the run's progress streamed into a reply (chat.startStream and
 * chat.appendStream, the default `auto` mode) or, where Slack refuses the stream or SLACK_REPLY_MODE
 * is `edit`, edited into that first message, at most once per interval; the member's slot freed as
 * soon as the run closes; and the answer delivered so that it always lands (the stream closed with
 * the rest of it, or the message edited, or new replies). One `ThreadAnswer` holds that state
 * across the run and across a continue-as-new. Older events answer the way they ran
 * (workflows/slack-legacy.ts).
 */
import {
  ActivityFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  log,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { DeliveryOutcome, DeliveryProgress, FirstMessageNotice } from '../activities/slack';
import { runReplyText } from '../src/slack/texts';
import { editDelay, nextEditAt, progressText, STREAMED_PARTS_TEXT, STREAMED_TEXT, WORKING_TEXT } from '../src/slack/progress';
import { DEFAULT_STREAM_LIMITS } from '../src/slack/stream-segments';
import type { RunProgress } from '../src/runs/contract';
import type { SlackEventInput, SlackEventState, SlackFollowing, SlackThreadView } from '../src/slack/contract';
import { continuesAsNew, olderAnswer } from './slack-legacy';
import { StreamWriter, type ProgressStep } from './slack-stream';
import { answerRecord, assistantEnded, assistantOpened, assistantProgress } from './slack-conversation';
import {
  outcomeOf,
  postAccepted,
  progressApi,
  progressInterval,
  slackApi,
  startInvocationRun,
  type FinalResult,
  type Invocation,
  type MessageRef,
  type ReservedRun,
  type RunOutcome,
} from './slack-invocation';

/** The history length past which an invocation that follows its run continues as new, when its event did not say. */
const DEFAULT_CONTINUE_AS_NEW_EVENTS = 4_000;
/** Between two tries of a final delivery that Slack kept failing (5xx, timeouts), once its activity's own retries are spent. */
const FINAL_RETRY_PAUSE_MS = 60_000;

type ChildEnd = Promise<{ summary: RunOutcome } | { error: unknown }>;
type Delivery = { replyKey: string; since: number; deadline: number };

/**
 * The invocation's run with its thread: answered the way its event's release did (older events),
 * else by a new `ThreadAnswer`.
 */
export function answerInThread(job: Invocation, run: ReservedRun): Promise<SlackEventState> {
  return olderAnswer(job, run, (ts, done) => ThreadAnswer.editsOnly(job, run, ts).keepThreadCurrent(done)) ?? ThreadAnswer.start(job, run);
}

/** One invocation's thread while its run works and once it ends. */
export class ThreadAnswer {
  /** The thread's first message, and the stream the progress and the answer go to, if any. */
  private readonly view: SlackThreadView;
  /** The newest progress the thread shows (its sequence), and when the next Slack call may go out. */
  private shown: number;
  private nextAt: number;
  /** Set once the run ended: the progress loop stops. */
  private done = false;
  private readonly ref: MessageRef;
  /** The streamed answer, in segments (workflows/slack-stream.ts). */
  private readonly writer: StreamWriter;

  constructor(
    private readonly job: Invocation,
    private readonly following: SlackFollowing,
  ) {
    this.view = following.view;
    this.shown = following.shown;
    this.nextAt = following.nextAt;
    this.ref = { connectionId: job.input.connectionId, channel: job.invocation.channel, threadTs: following.threadTs };
    const { invocation, input } = job;
    const dm = invocation.channelType === 'im' || invocation.channel.startsWith('D');
    this.writer = new StreamWriter(this.view, {
      ref: this.ref,
      // A partner workspace's member in a shared channel is streamed to in their own workspace.
      recipient: dm ? null : { userId: invocation.user, teamId: invocation.userTeam ?? input.teamId },
      force: this.view.force,
      limits: {
        maxAgeMs: input.settings.streamMaxAgeMs ?? DEFAULT_STREAM_LIMITS.maxAgeMs,
        maxBytes: input.settings.streamMaxBytes ?? DEFAULT_STREAM_LIMITS.maxBytes,
      },
    });
  }

  /**
   * A new invocation's: the run started and its first message posted in the same workflow task
   * ("Working on it…", or that no runtime of the member's is online; a queued follow-up's message
   * becomes it), then followed.
   */
  static async start(job: Invocation, run: ReservedRun): Promise<SlackEventState> {
    const { input, state } = job;
    const { opening = {}, ...reserved } = run;
    const ref: MessageRef = { connectionId: input.connectionId, channel: job.invocation.channel, threadTs: run.threadTs };
    const replyKey = workflowInfo().workflowId;
    const since = Date.now();
    const first = { runId: run.runId, replyKey, since, ...(opening.notice ? { notice: opening.notice } : {}) };
    const [child, ts] = await Promise.all([
      startInvocationRun(job, run),
      opening.posted ? reopenFirst(ref, opening.posted, first) : postAccepted(ref, first),
    ]);
    const mode = input.settings.replyMode ?? 'edit';
    const notice = opening.notice?.kind === 'no_runtime' ? ('no_runtime' as const) : null;
    const view: SlackThreadView = { ts, streaming: mode !== 'edit', force: mode === 'stream', stream: null, streamOff: false, notice };
    const at = { shown: 0, nextAt: nextEditAt(Date.now(), progressInterval(job)) };
    const assistant = opening.assistant ? { assistant: { tool: null } } : {};
    const following: SlackFollowing = { ...reserved, replyKey, view, ...at, progress: null, state, ...assistant };
    if (opening.assistant) await assistantOpened(job, following, opening.assistant.title);
    return new ThreadAnswer(job, following).followAndAnswer(outcomeOf(child));
  }

  /** Edits of a message already posted, the way events from before streaming kept it current. */
  static editsOnly(job: Invocation, run: ReservedRun, ts: string): ThreadAnswer {
    const view: SlackThreadView = { ts, streaming: false, force: false, stream: null, streamOff: false };
    const at = { shown: 0, nextAt: nextEditAt(Date.now(), progressInterval(job)) };
    return new ThreadAnswer(job, { ...run, replyKey: workflowInfo().workflowId, view, ...at, progress: null, state: job.state });
  }

  /**
   * Follows the run to its end, keeping the thread current, then answers. `child`: the run's
   * outcome while it is this execution's child; after a continue-as-new, its end comes as a signal.
   */
  async followAndAnswer(child?: Promise<RunOutcome>): Promise<SlackEventState> {
    const { input, records, state, cleanup } = this.job;
    let progressFailure: unknown;
    const loop: Promise<unknown> = this.view.ts === null ? Promise.resolve(this.showsNothing()) : this.keepThreadCurrent(() => this.done);
    const watching = loop.catch((error: unknown) => {
      progressFailure = error;
      this.showsNothing();
    });
    const childEnd = child?.then(
      (summary) => ({ summary }),
      (error: unknown) => ({ error }),
    );
    let summary = await this.awaitEnd(childEnd);
    if (summary === 'continue') {
      this.done = true;
      await watching;
      if (progressFailure !== undefined) throw progressFailure;
      // No signal may be lost across continue-as-new; an end that came meanwhile is answered here.
      await condition(allHandlersFinished);
      const settled = this.job.signals.ended() ?? (await settledChild(childEnd));
      if (settled === undefined) return this.continueAsNew();
      summary = settled;
    }
    this.done = true;
    // The slot is the member's while the run runs, no longer: freed before the answer goes out.
    // The answer is kept as the thread's message (the next request's context).
    await records('slackReleaseInvocation', {
      connectionId: input.connectionId,
      eventId: input.eventId,
      ...answerRecord(this.job, this.following, summary),
    });
    cleanup.reserved = false;
    state.runStatus = summary.status;
    await watching;
    if (progressFailure !== undefined) throw progressFailure;
    const wait = editDelay(Date.now(), this.nextAt);
    if (wait > 0) await sleep(wait);
    const deadline = Date.now() + (input.settings.finalDeliveryDeadlineMs ?? 3_600_000);
    return this.answer(summary, { replyKey: this.following.replyKey, since: Date.now(), deadline });
  }

  /** The answer delivered, and the invocation's status from how it went. */
  private async answer(summary: RunOutcome, at: Delivery): Promise<SlackEventState> {
    const { setStatus, state } = this.job;
    const reply = await this.deliverFinal(summary, at);
    await assistantEnded(this.job, this.following);
    if (summary.status === 'cancelled' && reply.result !== 'failed') setStatus('cancelled', summary.error ?? 'cancel_requested');
    else if (reply.result === 'failed') {
      log.warn('slack answer not delivered', { runId: this.following.runId, why: reply.why });
      setStatus('reply_failed', reply.why ?? 'failed');
    } else setStatus(reply.result === 'posted' ? 'replied' : 'reply_skipped');
    return state;
  }

  /** Carries the thread to the next execution, which follows the run from where this one left it. */
  private continueAsNew(): Promise<never> {
    const { input, state, signals } = this.job;
    const at = { shown: this.shown, nextAt: this.nextAt };
    const carried: SlackFollowing = { ...this.following, ...at, progress: signals.progress(), state: { ...state } };
    return continueAsNew<(input: SlackEventInput) => Promise<SlackEventState>>({ ...input, following: carried });
  }

  /** No message to keep current (none could be posted, or the loop failed): nothing shown, nothing to wait for. */
  private showsNothing(): void {
    this.shown = 0;
    this.nextAt = 0;
  }

  /**
   * The run's end: its child outcome (awaited as always, so a cancel still waits for the child to
   * close), its ended signal, or `continue` once the history is due to continue as new, which
   * only a run that tells its end allows.
   */
  private async awaitEnd(childEnd: ChildEnd | undefined): Promise<RunOutcome | 'continue'> {
    const { signals, input } = this.job;
    let mayContinue = true;
    const due = () => mayContinue && signals.progress()?.tellsEnd === true && continueDue(input);
    const signalled = () => signals.ended() !== undefined || due();
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
      const ended = signals.ended();
      if (ended !== undefined) return ended;
      if (continuesAsNew()) return 'continue';
      mayContinue = false;
    }
  }

  /**
   * Keeps the thread current with the run's newest progress until `done`: streamed into a reply
   * (chat.startStream at the first report, chat.appendStream after, the next reply once one is
   * old or large enough: workflows/slack-stream.ts) while Slack takes it, else edited into the
   * first message; at most one call per interval, later when Slack or the budget asks for a wait,
   * always the newest state. A streamed reply that reaches its age with nothing new is stopped
   * then. Leaves `nextAt` at when the next call may go out.
   */
  async keepThreadCurrent(done: () => boolean): Promise<number> {
    const { signals } = this.job;
    const interval = progressInterval(this.job);
    const newer = () => (signals.progress()?.sequence ?? 0) > this.shown;
    for (;;) {
      const closeAt = this.streams() ? this.writer.closeDueAt() : null;
      const woken = () => done() || newer() || this.noticeAnswered();
      if (closeAt === null) await condition(woken);
      else await condition(woken, Math.max(1, closeAt - Date.now()));
      if (done()) return this.nextAt;
      const wait = editDelay(Date.now(), this.nextAt);
      if (wait > 0 && (await condition(done, wait))) return this.nextAt;
      const progress = newer() ? signals.progress()! : null;
      // Claimed: the "no runtime" notice becomes "Working on it…" (an edit of progress replaces it anyway).
      const clearing = this.noticeAnswered() && (this.streams() || progress === null);
      let step: ProgressStep;
      try {
        step = clearing ? await this.clearNotice() : await this.progressStep(progress);
      } catch (error) {
        if (error instanceof ActivityFailure) return this.nextAt;
        throw error;
      }
      this.nextAt = nextEditAt(Date.now(), interval, step.retryAfterMs ?? 0);
      if (step.stop) return this.nextAt;
      if (step.shown && !clearing && progress) {
        this.shown = progress.sequence;
        await assistantProgress(this.job, this.following, progress.tool);
      }
    }
  }

  /** The newest progress streamed or edited in; without any, the streamed reply stopped at its age. */
  private progressStep(progress: RunProgress | null): Promise<ProgressStep> {
    if (progress === null) return this.streams() ? this.writer.closeIdle() : Promise.resolve({});
    return this.streams() ? this.writer.progress(progress) : this.editProgress(progress);
  }

  /** Progress goes into the stream (while Slack takes it), not into the first message. */
  private streams(): boolean {
    return this.view.streaming && !this.view.streamOff;
  }

  /** The first message still says no runtime is online, and a runtime has claimed the run. */
  private noticeAnswered(): boolean {
    return this.view.notice === 'no_runtime' && this.job.signals.claimed();
  }

  /** The first message becomes "Working on it…" (with its Cancel button): the run is claimed. */
  private async clearNotice(): Promise<ProgressStep> {
    const edit = await progressApi.slackUpdateProgress({ ...this.ref, ts: this.view.ts!, runId: this.following.runId, text: WORKING_TEXT });
    if (edit.outcome === 'ratelimited') return { retryAfterMs: edit.retryAfterMs };
    this.view.notice = null;
    return edit.outcome === 'updated' ? { shown: true } : { stop: true };
  }

  private async editProgress(progress: RunProgress): Promise<ProgressStep> {
    const { ts } = this.view;
    const edit = await progressApi.slackUpdateProgress({ ...this.ref, ts: ts!, runId: this.following.runId, text: progressText(progress) });
    if (edit.outcome === 'ratelimited') return { retryAfterMs: edit.retryAfterMs };
    // The progress replaced whatever notice the first message showed.
    if (edit.outcome === 'updated') this.view.notice = null;
    return edit.outcome === 'updated' ? { shown: true } : { stop: true };
  }

  /**
   * The answer: the stream closed with the rest of it and the outcome, and the first message's
   * Cancel button gone; or, without a stream (or one Slack broke), the answer delivered by edit or
   * as new replies (deliverAnswer).
   */
  private async deliverFinal(summary: RunOutcome, at: Delivery): Promise<FinalResult> {
    const { view } = this;
    const markdown = summary.status === 'succeeded' && !!summary.lastAssistantText?.trim();
    const answer = { text: markdown ? summary.lastAssistantText! : runReplyText(summary), markdown };
    if (view.stream !== null && !view.streamOff) {
      const stopped = await this.writer.finish(summary, at.deadline);
      if (stopped.result !== 'fallback') {
        if (stopped.result !== 'posted' || view.ts === null) return stopped;
        const streamed = this.writer.replies > 1 ? STREAMED_PARTS_TEXT : STREAMED_TEXT;
        const status = summary.status === 'succeeded' ? streamed : runReplyText({ ...summary, lastAssistantText: null });
        await this.deliverAnswer(view.ts, { text: status, markdown: false }, { ...at, replyKey: `${at.replyKey}/status` });
        return stopped;
      }
    }
    return this.deliverAnswer(view.ts, answer, at);
  }

  /**
   * The answer by slackDeliverAnswer, until it lands or the deadline passes: rate limits and the
   * budget wait on timers; an edit Slack keeps failing gives way to new replies. Never silent: a
   * failure says why.
   */
  private async deliverAnswer(ts: string | null, answer: { text: string; markdown: boolean }, at: Delivery): Promise<FinalResult> {
    let progress: DeliveryProgress = { edited: false, asReplies: false, posted: 0, superseded: false };
    let again = false;
    for (;;) {
      let out: DeliveryOutcome;
      try {
        out = await slackApi.slackDeliverAnswer({ ...this.ref, ts, ...answer, replyKey: at.replyKey, since: at.since, again, progress });
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
}

/**
 * A queued follow-up's message, now its first: edited into "Working on it…" (or the no-runtime
 * notice) with the Cancel button. Its ts, or null if Slack no longer has it (then nothing is kept current).
 */
async function reopenFirst(ref: MessageRef, ts: string, first: { runId: string; notice?: FirstMessageNotice }): Promise<string | null> {
  try {
    const edit = await progressApi.slackUpdateProgress({ ...ref, ts, runId: first.runId, text: WORKING_TEXT, notice: first.notice });
    return edit.outcome === 'message_not_found' ? null : ts;
  } catch (error) {
    if (error instanceof ActivityFailure) return ts;
    throw error;
  }
}

/** The child's outcome if it has settled already (awaited within this activation), else undefined. */
async function settledChild(childEnd: ChildEnd | undefined): Promise<RunOutcome | undefined> {
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
