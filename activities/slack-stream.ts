/**
 * Slack's native streaming for an invocation's answer (https://docs.slack.dev/reference/methods/chat.startStream):
 * chat.startStream opens a reply in the mention's thread, chat.appendStream adds Markdown and
 * task updates, chat.stopStream closes it. A stream spans activities, so the Slack workflow holds
 * the stream's `ts` and what it has appended; each call here is one step, within the workspace's
 * budget (Tier 2 for start and stop, Tier 4 for append). A connection whose streaming Slack
 * refuses is remembered, and its threads keep to edits (src/slack/outbound.ts).
 */
import { ApplicationFailure } from '@temporalio/common';
import type { WorkerDeps } from '../src/app/feature';
import type { BudgetPriority } from '../src/slack/budget';
import { rememberStreamingRefused } from '../src/slack/connections';
import { isConnectionError, postableConnection, sendWithin, type SlackCallDeps } from '../src/slack/outbound';
import type { SlackSettings } from '../src/slack/settings';
import { markdownPieces, type StreamChunk } from '../src/slack/stream';

type StreamActivityDeps = WorkerDeps<SlackSettings>;

export type StreamStep =
  | { outcome: 'ok'; ts?: string }
  | { outcome: 'ratelimited'; retryAfterMs: number }
  | { outcome: 'refused' | 'gone' | 'failed'; error: string }
  | { outcome: 'skipped' };

/** A refusal as a step: a rate limit waits, a connection error is final, any other final error means the stream is `other`. */
function stepOf(result: Awaited<ReturnType<typeof sendWithin>>, method: string, other: 'refused' | 'gone'): StreamStep {
  if (result.ok) return { outcome: 'ok', ...(typeof result.body.ts === 'string' ? { ts: result.body.ts } : {}) };
  if (result.error === 'ratelimited') return { outcome: 'ratelimited', retryAfterMs: result.retryAfterMs ?? 1000 };
  if (result.retryable) throw ApplicationFailure.create({ message: `Slack ${method} failed: ${result.error}`, type: 'SlackApiError' });
  return { outcome: isConnectionError(result.error) ? 'failed' : other, error: result.error };
}

interface StreamRef {
  connectionId: string;
  channel: string;
}

export function createStreamActivities(deps: StreamActivityDeps, calls: SlackCallDeps) {
  return {
    /**
     * Opens the stream as a reply in the thread; outside a DM Slack also needs whom it streams to.
     * Refused (for any reason but the connection's): remembered for the connection, unless `force`.
     */
    async slackStartStream(
      input: StreamRef & { threadTs: string; recipient: { userId: string; teamId: string } | null; force: boolean; chunks: StreamChunk[] },
    ): Promise<StreamStep> {
      const postable = await postableConnection(deps, input.connectionId);
      if ('skipped' in postable) return { outcome: 'skipped' };
      const remembered = postable.connection.streamingRefused;
      if (remembered !== null && !input.force) return { outcome: 'refused', error: remembered };
      const body = {
        channel: input.channel,
        thread_ts: input.threadTs,
        task_display_mode: 'timeline',
        ...(input.recipient ? { recipient_user_id: input.recipient.userId, recipient_team_id: input.recipient.teamId } : {}),
        ...(input.chunks.length > 0 ? { chunks: input.chunks } : {}),
      };
      const step = stepOf(
        await sendWithin(calls, postable.connection, { method: 'chat.startStream', body, priority: 'progress' }),
        'chat.startStream',
        'refused',
      );
      if (step.outcome === 'refused') {
        await rememberStreamingRefused(deps.db, { connectionId: input.connectionId, error: step.error });
        deps.log.warn({ connectionId: input.connectionId, error: step.error }, 'slack refused streaming: the thread keeps to edits');
      }
      return step;
    },

    /** Adds Markdown (already escaped, at most 12,000 characters) and task updates to the stream. */
    async slackAppendStream(
      input: StreamRef & { streamTs: string; markdown: string; chunks: StreamChunk[]; priority: BudgetPriority },
    ): Promise<StreamStep> {
      const postable = await postableConnection(deps, input.connectionId);
      if ('skipped' in postable) return { outcome: 'skipped' };
      const body = {
        channel: input.channel,
        ts: input.streamTs,
        ...(input.markdown !== '' ? { markdown_text: input.markdown } : {}),
        ...(input.chunks.length > 0 ? { chunks: input.chunks } : {}),
      };
      const appended = await sendWithin(calls, postable.connection, { method: 'chat.appendStream', body, priority: input.priority });
      return stepOf(appended, 'chat.appendStream', 'gone');
    },

    /**
     * Closes the stream with the rest of the answer and its outcome (escaped Markdown): pieces of at
     * most 12,000 characters from `from` appended, the last one with chat.stopStream. Answers how
     * far it got when it must wait.
     */
    async slackStopStream(
      input: StreamRef & { streamTs: string; markdown: string; from: number; chunks: StreamChunk[] },
    ): Promise<StreamStep | { outcome: 'ratelimited'; retryAfterMs: number; from: number }> {
      const postable = await postableConnection(deps, input.connectionId);
      if ('skipped' in postable) return { outcome: 'skipped' };
      const pieces = markdownPieces(input.markdown.slice(input.from));
      let from = input.from;
      for (const piece of pieces.slice(0, -1)) {
        const body = { channel: input.channel, ts: input.streamTs, markdown_text: piece };
        const appended = await sendWithin(calls, postable.connection, { method: 'chat.appendStream', body, priority: 'final' });
        const step = stepOf(appended, 'chat.appendStream', 'gone');
        if (step.outcome === 'ratelimited') return { ...step, from };
        if (step.outcome !== 'ok') return step;
        from += piece.length;
      }
      const last = pieces.at(-1) ?? '';
      const body = {
        channel: input.channel,
        ts: input.streamTs,
        ...(last !== '' ? { markdown_text: last } : {}),
        ...(input.chunks.length > 0 ? { chunks: input.chunks } : {}),
      };
      const stopped = await sendWithin(calls, postable.connection, { method: 'chat.stopStream', body, priority: 'final' });
      const step = stepOf(stopped, 'chat.stopStream', 'gone');
      return step.outcome === 'ratelimited' ? { ...step, from } : step;
    },

    /**
     * A streamed message Slack closed before it was stopped (`message_not_in_streaming_state`),
     * left half written: chat.update gives it the Markdown it holds, so it reads as the part of the
     * answer it is; one that holds nothing is deleted. A message gone already needs nothing.
     */
    async slackRepairStream(input: StreamRef & { streamTs: string; markdown: string }): Promise<StreamStep> {
      const postable = await postableConnection(deps, input.connectionId);
      if ('skipped' in postable) return { outcome: 'skipped' };
      const [method, body] =
        input.markdown.trim() === ''
          ? (['chat.delete', { channel: input.channel, ts: input.streamTs }] as const)
          : (['chat.update', { channel: input.channel, ts: input.streamTs, markdown_text: input.markdown }] as const);
      const result = await sendWithin(calls, postable.connection, { method, body, priority: 'final' });
      if (!result.ok && result.error === 'message_not_found') return { outcome: 'ok' };
      return stepOf(result, method, 'gone');
    },
  };
}
