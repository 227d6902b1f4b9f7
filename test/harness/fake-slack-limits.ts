/**
 * What the fake Slack (test/harness/fake-slack.ts) refuses that Slack refuses and its documentation
 * barely says, each bound an option so a test can scale it (stating its ratio where it does):
 *
 * - A streamed message closes about 5 minutes after chat.startStream, even while appends keep
 *   coming (slackapi/python-slack-sdk issue 1859): past `streamMaxAgeMs` the stream is closed by
 *   Slack, chat.appendStream and chat.stopStream answer `message_not_in_streaming_state`, and the
 *   message is stuck, half written, until chat.update repairs it.
 * - A streamed message stops growing at roughly 10.6–12k, counted in UTF-8 bytes with the task
 *   titles included (CopilotKit pull request 6064): an append past `streamMaxBytes` in all answers
 *   `msg_too_long`, and the stream stays open.
 * - chat.postMessage "generally allows posting one message per second per channel", short bursts
 *   tolerated (https://docs.slack.dev/apis/web-api/rate-limits): a bucket per workspace and
 *   channel holds `channelPostBurst` posts and refills one per `channelPostIntervalMs`; past it,
 *   HTTP 429 with `Retry-After` in seconds.
 */
import type { FakeMessage } from './fake-slack';

export interface StrictLimits {
  /** After this long a stream is closed by Slack (about 5 minutes observed). */
  streamMaxAgeMs: number;
  /** A stream's Markdown and task titles, in UTF-8 bytes, grow no further than this. */
  streamMaxBytes: number;
  /** Posts one channel takes at once before its rate applies. */
  channelPostBurst: number;
  /** One more post per channel each this long. */
  channelPostIntervalMs: number;
}

export const STRICT_DEFAULTS: StrictLimits = {
  streamMaxAgeMs: 5 * 60_000,
  streamMaxBytes: 10_600,
  channelPostBurst: 2,
  channelPostIntervalMs: 1000,
};

type Answer = { status: number; body: Record<string, unknown>; headers?: Record<string, string> };

/** Where a streamed message stands: open, stopped by its app, closed by Slack and still stuck, or repaired by chat.update after that. */
export type StreamState = 'streaming' | 'stopped' | 'stuck' | 'repaired';

export function streamState(message: FakeMessage, limits: Pick<StrictLimits, 'streamMaxAgeMs'>, now = Date.now()): StreamState | undefined {
  const stream = message.stream;
  if (!stream) return undefined;
  if (stream.stopped) return 'stopped';
  if (stream.repaired) return 'repaired';
  return now - message.postedAt >= limits.streamMaxAgeMs ? 'stuck' : 'streaming';
}

/** What a streaming call adds to the message's size: its Markdown and its chunks' texts and task titles, in UTF-8 bytes. */
export function streamCallBytes(markdown: string, chunks: Record<string, unknown>[]): number {
  let bytes = Buffer.byteLength(markdown, 'utf8');
  for (const chunk of chunks) {
    for (const key of ['text', 'title'] as const) if (typeof chunk[key] === 'string') bytes += Buffer.byteLength(chunk[key], 'utf8');
  }
  return bytes;
}

/** Why an append or a stop of this message is refused by the stream's limits, if it is. */
export function streamLimitError(
  message: FakeMessage & { stream: NonNullable<FakeMessage['stream']> },
  added: number,
  limits: StrictLimits,
): string | undefined {
  const state = streamState(message, limits);
  if (state !== 'streaming') return 'message_not_in_streaming_state';
  if ((message.stream.bytes ?? 0) + added > limits.streamMaxBytes) return 'msg_too_long';
  return undefined;
}

/** A post over its channel's rate: 429 with the seconds until the bucket has a post again; else the post counts. */
export function channelPostLimited(
  buckets: Map<string, { tokens: number; at: number }>,
  key: string,
  limits: StrictLimits,
  now = Date.now(),
): Answer | undefined {
  const { channelPostBurst: burst, channelPostIntervalMs: interval } = limits;
  const bucket = buckets.get(key) ?? { tokens: burst, at: now };
  const tokens = Math.min(burst, bucket.tokens + (now - bucket.at) / interval);
  if (tokens < 1) {
    buckets.set(key, { tokens, at: now });
    const retryAfter = Math.max(1, Math.ceil(((1 - tokens) * interval) / 1000));
    return { status: 429, headers: { 'retry-after': String(retryAfter) }, body: { ok: false, error: 'ratelimited' } };
  }
  buckets.set(key, { tokens: tokens - 1, at: now });
  return undefined;
}
