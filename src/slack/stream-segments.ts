/**
 * A streamed answer as Slack lets it live: one streamed message closes by itself about 5 minutes
 * after chat.startStream (slackapi/python-slack-sdk issue 1859) and stops growing at roughly
 * 10.6–12k in all, counted in UTF-8 bytes with the task titles (CopilotKit pull request 6064); only
 * the 12,000 characters per call are documented (https://docs.slack.dev/reference/methods/chat.appendStream).
 * So the answer streams in segments: each a streamed reply in the same thread, stopped before it
 * reaches SLACK_STREAM_MAX_AGE or SLACK_STREAM_MAX_BYTES, the next one carrying on. Pure and free
 * of Node imports: the slack-event workflow uses it.
 */
import { utf8Bytes } from '../app/utf8';
import { cutBefore, STREAM_CALL_LIMIT, type StreamChunk } from './stream';

/** When a segment is stopped, by age and by size: both inside what Slack allows. */
export interface StreamLimits {
  maxAgeMs: number;
  maxBytes: number;
}

/** SLACK_STREAM_MAX_AGE and SLACK_STREAM_MAX_BYTES by default: 4 minutes and 9,000 bytes. */
export const DEFAULT_STREAM_LIMITS: StreamLimits = { maxAgeMs: 4 * 60_000, maxBytes: 9_000 };

/** The segment the answer streams into now. */
export interface StreamSegment {
  /** Workflow time of its chat.startStream. */
  startedAt: number;
  /** Its Markdown and task titles so far, in UTF-8 bytes. */
  bytes: number;
  /** The Markdown it holds: what chat.update gives it back if Slack closes it first. */
  text: string;
  /** `open` while it streams; `stopped` by us; `stuck` once Slack closed it, until it is repaired; `full` once Slack refused to grow it. */
  state: 'open' | 'stopped' | 'stuck' | 'full';
  /** How many segments the answer has had, this one included. */
  count: number;
}

/** A new segment, just started. */
export const freshSegment = (startedAt: number, count: number): StreamSegment => ({ startedAt, bytes: 0, text: '', state: 'open', count });

/** What chunks add to a streamed message's size: their texts and task titles, as Slack counts them. */
export function chunkBytes(chunks: StreamChunk[]): number {
  return chunks.reduce((sum, chunk) => sum + utf8Bytes(chunk.type === 'task_update' ? chunk.title : chunk.text), 0);
}

/** The segment cannot take more now: stopped, stuck, refused, or past its age. */
export function segmentDone(segment: StreamSegment, now: number, limits: StreamLimits): boolean {
  return segment.state !== 'open' || now - segment.startedAt >= limits.maxAgeMs;
}

/** Bytes the open segment still takes. */
export const roomLeft = (segment: StreamSegment, limits: StreamLimits): number => Math.max(0, limits.maxBytes - segment.bytes);

/** What is to be added to a segment, and the segment as it stands at `now` under its limits. */
interface SegmentAddition {
  segment: StreamSegment;
  add: { markdown: string; chunks: StreamChunk[] };
  now: number;
  limits: StreamLimits;
}

/** Whether `markdown` and `chunks` go into the segment in one call, as they did before segments: open, young enough, and room for them. */
export function fitsOneCall({ segment, add, now, limits }: SegmentAddition): boolean {
  if (segmentDone(segment, now, limits) || add.markdown.length > STREAM_CALL_LIMIT) return false;
  return utf8Bytes(add.markdown) + chunkBytes(add.chunks) <= roomLeft(segment, limits);
}

/**
 * Where to cut escaped Markdown so that its first part holds at most `maxBytes` UTF-8 bytes and
 * 12,000 characters: as cutBefore cuts (src/slack/stream.ts), and never inside a surrogate pair.
 * The whole text when it fits; 0 when not even one character does.
 */
export function cutToFit(text: string, maxBytes: number): number {
  let limit = 0;
  for (let bytes = 0; limit < text.length && limit < STREAM_CALL_LIMIT;) {
    const pair = text.charCodeAt(limit) >= 0xd800 && text.charCodeAt(limit) <= 0xdbff && limit + 1 < text.length;
    const size = utf8Bytes(text.slice(limit, limit + (pair ? 2 : 1)));
    if (bytes + size > maxBytes) break;
    bytes += size;
    limit += pair ? 2 : 1;
  }
  if (limit === text.length || limit === 0) return limit;
  return cutBefore(text, limit);
}

/**
 * What of `markdown` goes into the segment now: the whole when it fits; else a part filling the
 * room, when the room is worth a part (a quarter of a segment or more), the rest for the next
 * segment; else nothing, and the next segment takes it all.
 */
export function pieceForSegment(markdown: string, segment: StreamSegment, limits: StreamLimits): string {
  const room = roomLeft(segment, limits);
  const whole = cutToFit(markdown, room);
  if (whole === markdown.length) return markdown;
  if (room < limits.maxBytes / 4) return '';
  return markdown.slice(0, whole);
}
