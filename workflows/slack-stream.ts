/**
 * An invocation's streamed answer (chat.startStream, chat.appendStream, chat.stopStream), in
 * segments that Slack lets finish (src/slack/stream-segments.ts): a streamed reply is stopped
 * before SLACK_STREAM_MAX_AGE or SLACK_STREAM_MAX_BYTES and the answer carries on in a new
 * streamed reply in the same thread; one Slack closed first (`message_not_in_streaming_state`) is
 * repaired with chat.update, given the Markdown it holds, and one Slack will not grow (`msg_too_long`)
 * is stopped, the answer carrying on either way. What was not appended yet waits in the view
 * (`pending`), so every word goes out once, in order, and the last segment carries the outcome.
 *
 * What fits one call goes out as it did before segments, so older histories replay unchanged; only
 * where segments change what is sent is SLACK_STREAM_SEGMENTS_PATCH asked (workflows/slack-legacy.ts).
 */
import { ActivityFailure, sleep } from '@temporalio/workflow';
import type { SlackActivities } from '../activities/slack';
import type { StreamStep } from '../activities/slack-stream';
import { finalMarkdown, markdownPieces, progressStep, type StreamChunk } from '../src/slack/stream';
import {
  chunkBytes,
  fitsOneCall,
  freshSegment,
  pieceForSegment,
  roomLeft,
  segmentDone,
  type StreamLimits,
  type StreamSegment,
} from '../src/slack/stream-segments';
import type { RunProgress } from '../src/runs/contract';
import { utf8Bytes } from '../src/app/utf8';
import type { SlackThreadView } from '../src/slack/contract';
import { streamsInSegments } from './slack-legacy';
import { progressApi, slackApi, type FinalResult, type MessageRef, type RunOutcome } from './slack-invocation';

/** What one progress step did: shown, to wait for, or the end of progress for this message. */
export interface ProgressStep {
  shown?: boolean;
  retryAfterMs?: number;
  stop?: boolean;
}

/** What a stream needs beyond its view: where it is, whom it streams to, and its segments' limits. */
export interface StreamPlace {
  ref: MessageRef;
  /** Outside a DM, the member and their own workspace (a partner's in a shared channel). */
  recipient: { userId: string; teamId: string } | null;
  /** `stream` mode: try even where the connection's streaming was refused before. */
  force: boolean;
  limits: StreamLimits;
}

/** The workspace budget's priority of a call, as the activities take it: a final answer, or progress a newer state may replace. */
type CallPriority = Parameters<SlackActivities['slackAppendStream']>[0]['priority'];
type Stream = NonNullable<SlackThreadView['stream']>;
type Open = Stream & { segment: StreamSegment };
/** Where a write stands: go on, wait, or stop streaming (edits and replies take over). */
type Turn = 'next' | { retryAfterMs: number } | 'off';
/** How a write reaches Slack: through which activity options (progressApi or slackApi), at which budget priority. */
interface StreamCall {
  api: typeof slackApi;
  priority: CallPriority;
}

/**
 * A refusal the answer gets past: Slack will not grow a segment (the next, or a smaller piece,
 * goes on), or closed one that took something (a fresh one closed at once would be closed again).
 */
const carriesOn = (step: StreamStep, segment: StreamSegment) =>
  step.outcome === 'gone' && (step.error === 'msg_too_long' || (step.error === 'message_not_in_streaming_state' && segment.bytes > 0));

/** Below this, a segment Slack keeps refusing to grow is not worth another: streaming ends. */
const MIN_SEGMENT_BYTES = 256;

const closeTask = (id: string): StreamChunk => ({ type: 'task_update', id, title: 'Done', status: 'complete' });
const isEmpty = (pending: Stream['pending']) => !pending || (pending.markdown === '' && pending.chunks.length === 0);

export class StreamWriter {
  constructor(
    private readonly view: SlackThreadView,
    private readonly place: StreamPlace,
  ) {}

  /** How many streamed replies the answer has had. */
  get replies(): number {
    return this.view.stream?.segment?.count ?? 1;
  }

  /** One progress step: the stream opened at the first report, the newest text and tool appended. */
  async progress(progress: RunProgress): Promise<ProgressStep> {
    const { view } = this;
    if (view.stream === null) {
      const opened = await this.start(progressApi, { force: this.place.force, count: 1 });
      if (opened !== 'next') return opened === 'off' ? {} : opened;
    }
    const stream = view.stream!;
    const next = progressStep(stream.streamed, progress, stream.openTask);
    const add = { markdown: next.append, chunks: next.chunks };
    if (!stream.segment || (isEmpty(stream.pending) && this.takesInOneCall(stream as Open, add))) {
      return this.appendAsBefore(stream, next);
    }
    if (!streamsInSegments()) return this.appendAsBefore(stream, next);
    stream.pending = {
      markdown: (stream.pending?.markdown ?? '') + add.markdown,
      chunks: [...(stream.pending?.chunks ?? []), ...add.chunks],
    };
    stream.streamed = next.streamed;
    stream.openTask = next.openTask;
    const written = await this.write(stream as Open, 'progress', false);
    return written === 'next' ? { shown: true } : written === 'off' ? {} : written;
  }

  /**
   * When the open segment must be stopped though nothing new came (its age), or null: the thread
   * waits for the next report until then. Only with segments (a timer is a new command).
   */
  closeDueAt(): number | null {
    const segment = this.view.stream?.segment;
    if (!segment || segment.state !== 'open' || !isEmpty(this.view.stream?.pending) || this.view.streamOff) return null;
    return streamsInSegments() ? segment.startedAt + this.place.limits.maxAgeMs : null;
  }

  /** The open segment stopped at its age, nothing new to say: the next report starts the next one. */
  async closeIdle(): Promise<ProgressStep> {
    const stream = this.view.stream as Open;
    const turned = await this.stopSegment(stream, 'progress');
    return turned === 'next' || turned === 'off' ? {} : turned;
  }

  /**
   * The answer: the rest of it and the outcome, in the segment that takes it or in new ones, the
   * last stopped with chat.stopStream. Rate limits wait until the deadline; a stream Slack lost
   * falls back to replies (deliverAnswer).
   */
  async finish(summary: RunOutcome, deadline: number): Promise<FinalResult | { result: 'fallback' }> {
    const stream = this.view.stream!;
    const markdown = finalMarkdown(stream.streamed, summary);
    const chunks = stream.openTask ? [closeTask(stream.openTask)] : [];
    const segment = stream.segment;
    const add = { markdown, chunks };
    if (!segment || (isEmpty(stream.pending) && this.takesInOneCall(stream as Open, add))) {
      const stopped = await this.stopAsBefore(stream, { markdown, chunks }, deadline);
      if (!('gone' in stopped)) return stopped;
      const refusal: StreamStep = { outcome: 'gone', error: stopped.gone };
      if (!segment || !carriesOn(refusal, segment) || !streamsInSegments()) return { result: 'fallback' };
      if (this.refused(stream as Open, refusal, utf8Bytes(markdown) + chunkBytes(chunks)) === 'off') return { result: 'fallback' };
    } else if (!streamsInSegments()) {
      const stopped = await this.stopAsBefore(stream, { markdown, chunks }, deadline);
      return 'gone' in stopped ? { result: 'fallback' } : stopped;
    }
    stream.pending = { markdown: (stream.pending?.markdown ?? '') + markdown, chunks: [...(stream.pending?.chunks ?? []), ...chunks] };
    stream.openTask = null;
    for (;;) {
      const written = await this.write(stream as Open, 'final', true);
      if (written === 'next') return { result: 'posted' };
      if (written === 'off') return { result: 'fallback' };
      if (Date.now() + written.retryAfterMs > deadline) return { result: 'fallback' };
      await sleep(written.retryAfterMs);
    }
  }

  /**
   * A progress step as it went before segments: one append, or a text over a call's limit in
   * several. A segment Slack closed or will not grow goes on in the next, with what it did not take.
   */
  private async appendAsBefore(stream: Stream, next: ReturnType<typeof progressStep>): Promise<ProgressStep> {
    const pieces = next.append === '' ? [] : markdownPieces(next.append);
    for (const [index, piece] of (pieces.length > 0 ? pieces : ['']).entries()) {
      const chunks: StreamChunk[] = index === 0 ? next.chunks : [];
      if (piece === '' && chunks.length === 0) break;
      const appended = await this.append(stream, { markdown: piece, chunks }, { api: progressApi, priority: 'progress' });
      if (appended.outcome === 'ratelimited') return { retryAfterMs: appended.retryAfterMs };
      if (appended.outcome === 'ok') continue;
      if (!stream.segment || !carriesOn(appended, stream.segment) || !streamsInSegments()) {
        this.view.streamOff = true;
        return {};
      }
      Object.assign(stream, {
        streamed: next.streamed,
        openTask: next.openTask,
        pending: { markdown: pieces.slice(index).join(''), chunks },
      });
      if (this.refused(stream as Open, appended, utf8Bytes(piece) + chunkBytes(chunks)) === 'off') return {};
      const written = await this.write(stream as Open, 'progress', false);
      return written === 'next' ? { shown: true } : written === 'off' ? {} : written;
    }
    stream.streamed = next.streamed;
    stream.openTask = next.openTask;
    return { shown: true };
  }

  /** chat.stopStream with the whole rest, waiting out rate limits, as before segments; how Slack refused it, when it did. */
  private async stopAsBefore(
    stream: Stream,
    rest: { markdown: string; chunks: StreamChunk[] },
    deadline: number,
  ): Promise<FinalResult | { result: 'fallback' } | { gone: string }> {
    const { connectionId, channel } = this.place.ref;
    let from = 0;
    for (;;) {
      let step: Awaited<ReturnType<typeof slackApi.slackStopStream>>;
      try {
        step = await slackApi.slackStopStream({
          connectionId,
          channel,
          streamTs: stream.ts,
          markdown: rest.markdown,
          from,
          chunks: rest.chunks,
        });
      } catch (error) {
        if (error instanceof ActivityFailure) return { result: 'fallback' };
        throw error;
      }
      if (step.outcome === 'ok') {
        if (stream.segment) Object.assign(stream.segment, { state: 'stopped', text: stream.segment.text + rest.markdown });
        return { result: 'posted' };
      }
      if (step.outcome === 'skipped') return { result: 'skipped' };
      if (step.outcome === 'gone') return { gone: step.error };
      if (step.outcome !== 'ratelimited') return { result: 'fallback' };
      from = 'from' in step ? step.from : from;
      if (Date.now() + step.retryAfterMs > deadline) return { result: 'fallback' };
      await sleep(step.retryAfterMs);
    }
  }

  /**
   * Writes what is pending, segment after segment: each piece into the segment while it has room
   * and time, a full or old one stopped (or repaired) and the next one started. With `final`, the
   * last piece stops the last segment. `next` once all is written.
   */
  private async write(stream: Open, priority: CallPriority, final: boolean): Promise<Turn> {
    const api = final ? slackApi : progressApi;
    for (;;) {
      const pending = stream.pending ?? { markdown: '', chunks: [] };
      const segment = stream.segment;
      // Nothing left to write: a segment that cannot go on is stopped (or repaired) now, not left for Slack to close.
      if (isEmpty(pending) && !final && segment.state !== 'stopped' && segmentDone(segment, Date.now(), this.limitsOf(stream))) {
        const stopped = await this.stopSegment(stream, priority);
        if (stopped !== 'next') return stopped;
        continue;
      }
      if (isEmpty(pending) && (!final || segment.state === 'stopped')) {
        delete stream.pending;
        return 'next';
      }
      if (segmentDone(segment, Date.now(), this.limitsOf(stream))) {
        const turned =
          segment.state === 'stopped'
            ? await this.start(api, { force: true, count: segment.count + 1 })
            : await this.stopSegment(stream, priority);
        if (turned !== 'next') return turned;
        continue;
      }
      const written =
        final && this.takesInOneCall(stream, pending)
          ? await this.stopWith(stream, pending)
          : await this.appendPiece(stream, pending, { api, priority });
      if (written !== 'next') return written;
    }
  }

  /** Whether the open segment takes `add` (all that is pending, or a step) in one call, now. */
  private takesInOneCall(stream: Open, add: { markdown: string; chunks: StreamChunk[] }): boolean {
    return fitsOneCall({ segment: stream.segment, add, now: Date.now(), limits: this.limitsOf(stream) });
  }

  /** The segments' limits: the settings', and smaller once Slack refused to grow one before them. */
  private limitsOf(stream: Stream): StreamLimits {
    const { limits } = this.place;
    return stream.maxBytes === undefined ? limits : { ...limits, maxBytes: Math.min(limits.maxBytes, stream.maxBytes) };
  }

  /** The next piece of what is pending into the open segment (with its task updates); a segment without room is stopped first. */
  private async appendPiece(stream: Open, pending: NonNullable<Stream['pending']>, call: StreamCall): Promise<Turn> {
    const segment = stream.segment;
    const limits = this.limitsOf(stream);
    const chunkSize = chunkBytes(pending.chunks);
    // Task updates too large for any segment go into a fresh one all the same, or no segment would ever take them.
    const noRoom = chunkSize > roomLeft(segment, limits) && segment.bytes > 0;
    const piece = noRoom ? '' : pieceForSegment(pending.markdown, { ...segment, bytes: segment.bytes + chunkSize }, limits);
    if (noRoom || (piece === '' && pending.chunks.length === 0)) return this.stopSegment(stream, call.priority);
    const appended = await this.append(stream, { markdown: piece, chunks: pending.chunks }, call);
    if (appended.outcome === 'ratelimited') return { retryAfterMs: appended.retryAfterMs };
    if (appended.outcome !== 'ok') return this.refused(stream, appended, utf8Bytes(piece) + chunkSize);
    stream.pending = { markdown: pending.markdown.slice(piece.length), chunks: [] };
    return 'next';
  }

  /** The last of it with chat.stopStream: the segment stopped, nothing left pending. */
  private async stopWith(stream: Open, pending: NonNullable<Stream['pending']>): Promise<Turn> {
    const { connectionId, channel } = this.place.ref;
    const step = await slackApi.slackStopStream({
      connectionId,
      channel,
      streamTs: stream.ts,
      markdown: pending.markdown,
      from: 0,
      chunks: pending.chunks,
    });
    if (step.outcome === 'ratelimited') return { retryAfterMs: step.retryAfterMs };
    if (step.outcome !== 'ok') return this.refused(stream, step, utf8Bytes(pending.markdown) + chunkBytes(pending.chunks));
    Object.assign(stream.segment, {
      state: 'stopped',
      text: stream.segment.text + pending.markdown,
      bytes: stream.segment.bytes + utf8Bytes(pending.markdown),
    });
    delete stream.pending;
    return 'next';
  }

  /**
   * How a refused write of `attempted` bytes goes on. A segment Slack closed is repaired. One it
   * will not grow is stopped, and no segment holds more than it took from here on; refused while
   * empty, the pieces get smaller, down to MIN_SEGMENT_BYTES. Anything else, and a segment
   * closed before it took anything, ends streaming.
   */
  private refused(stream: Open, step: StreamStep, attempted: number): Turn {
    const segment = stream.segment;
    if (carriesOn(step, segment) && step.outcome === 'gone' && step.error === 'message_not_in_streaming_state') {
      segment.state = 'stuck';
      return 'next';
    }
    const held = segment.bytes > 0 ? segment.bytes : Math.floor(attempted / 2);
    if (carriesOn(step, segment) && held >= MIN_SEGMENT_BYTES) {
      stream.maxBytes = Math.min(stream.maxBytes ?? held, held);
      if (segment.bytes > 0) segment.state = 'full';
      return 'next';
    }
    this.view.streamOff = true;
    return 'off';
  }

  /**
   * The segment ended: stopped (its open task closed, unless Slack will not grow it), or, once
   * Slack closed it, repaired with chat.update giving it the Markdown it holds.
   */
  private async stopSegment(stream: Open, priority: CallPriority): Promise<Turn> {
    const segment = stream.segment;
    const { connectionId, channel } = this.place.ref;
    const api = priority === 'final' ? slackApi : progressApi;
    let step: StreamStep;
    if (segment.state === 'stuck') {
      step = await api.slackRepairStream({ connectionId, channel, streamTs: stream.ts, markdown: segment.text });
      // Repaired, or past repair: either way this segment is done, and the answer carries on.
      if (step.outcome !== 'ratelimited') segment.state = 'stopped';
    } else {
      const { closing, closesOpen } = this.closingChunks(stream);
      step = await api.slackStopStream({ connectionId, channel, streamTs: stream.ts, markdown: '', from: 0, chunks: closing });
      if (step.outcome === 'ok') {
        segment.state = 'stopped';
        if (closesOpen) stream.openTask = null;
        if (stream.pending) stream.pending.chunks = stream.pending.chunks.filter((chunk) => !closing.includes(chunk));
      } else if (step.outcome === 'gone' && step.error === 'message_not_in_streaming_state') segment.state = 'stuck';
      // Its task updates would grow it: stopped again without them, and, refused even so, repaired.
      else if (step.outcome === 'gone' && step.error === 'msg_too_long') segment.state = segment.state === 'full' ? 'stuck' : 'full';
      else if (step.outcome !== 'ratelimited') {
        this.view.streamOff = true;
        return 'off';
      }
    }
    return step.outcome === 'ratelimited' ? { retryAfterMs: step.retryAfterMs } : 'next';
  }

  /**
   * What closes a segment's tasks: the one it shows open and the completions pending of tasks it
   * shows (a stop closes them, so the next segment opens its own). A task opened by a pending
   * update is the next segment's. Nothing for a segment Slack will not grow.
   */
  private closingChunks(stream: Open): { closing: StreamChunk[]; closesOpen: boolean } {
    const pending = stream.pending?.chunks ?? [];
    const upcoming = new Set(
      pending.flatMap((chunk) => (chunk.type === 'task_update' && chunk.status === 'in_progress' ? [chunk.id] : [])),
    );
    const shown = stream.openTask !== null && !upcoming.has(stream.openTask);
    if (stream.segment.state === 'full') return { closing: [], closesOpen: shown };
    const done = pending.filter((chunk) => chunk.type === 'task_update' && chunk.status === 'complete' && !upcoming.has(chunk.id));
    const closedAlready = done.some((chunk) => chunk.type === 'task_update' && chunk.id === stream.openTask);
    return { closing: [...done, ...(shown && !closedAlready ? [closeTask(stream.openTask!)] : [])], closesOpen: shown };
  }

  /** A new streamed reply in the thread: the first, or the next segment. */
  private async start(api: typeof slackApi, opening: { force: boolean; count: number }): Promise<Turn> {
    const started = await api.slackStartStream({ ...this.place.ref, recipient: this.place.recipient, force: opening.force, chunks: [] });
    if (started.outcome === 'ratelimited') return { retryAfterMs: started.retryAfterMs };
    if (started.outcome !== 'ok' || started.ts === undefined) {
      this.view.streamOff = true;
      return 'off';
    }
    const segment = freshSegment(Date.now(), opening.count);
    // The next segment changes the stream in place: a write under way holds it.
    if (this.view.stream) Object.assign(this.view.stream, { ts: started.ts, segment });
    else this.view.stream = { ts: started.ts, streamed: { source: '' }, openTask: null, segment };
    return 'next';
  }

  /** One append to the stream; an open segment counts what it took. */
  private async append(
    stream: Stream,
    add: { markdown: string; chunks: StreamChunk[] },
    { api, priority }: StreamCall,
  ): Promise<StreamStep> {
    const { connectionId, channel } = this.place.ref;
    const appended = await api.slackAppendStream({ connectionId, channel, streamTs: stream.ts, ...add, priority });
    if (appended.outcome === 'ok' && stream.segment) {
      stream.segment.bytes += utf8Bytes(add.markdown) + chunkBytes(add.chunks);
      stream.segment.text += add.markdown;
    }
    return appended;
  }
}
