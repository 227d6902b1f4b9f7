/**
 * The one message a Slack invocation keeps current: what it shows while the run works, when the
 * next edit may go out, and how a long answer is cut into messages. Pure and free of Node
 * imports: the slack-event workflow uses it.
 */
import type { RunProgress } from '../runs/contract';
import { escapeMrkdwn } from './texts';

/** The Cancel button's action_id; its value is the run id (the interactions route reads both). */
export const CANCEL_ACTION_ID = 'den_cancel_run';

export const WORKING_TEXT = 'Working on it…';

/** Slack refuses a section block's text over 3,000 characters; a longer answer goes on in the thread. */
export const MESSAGE_TEXT_LIMIT = 3000;

/**
 * What the message shows for a progress report: the newest text (escaped as it stands: it is
 * converted from Markdown only once the run has answered), or the tool the run is using.
 */
export function progressText(progress: Pick<RunProgress, 'text' | 'tool'>): string {
  const text = progress.text?.trim()
    ? escapeMrkdwn(progress.text)
    : progress.tool
      ? `_using ${escapeMrkdwn(progress.tool)}…_`
      : WORKING_TEXT;
  return text.length > MESSAGE_TEXT_LIMIT ? `${text.slice(0, lastCutBefore(text, MESSAGE_TEXT_LIMIT - 1))}…` : text;
}

/** The newer of two progress reports (signals may arrive out of order). */
export function newerProgress(current: RunProgress | null, next: RunProgress): RunProgress {
  return current !== null && current.sequence >= next.sequence ? current : next;
}

/**
 * When the next edit may go out, after one went out at `now`: one interval later, or later still
 * when Slack asked us to wait (a 429's Retry-After).
 */
export function nextEditAt(now: number, intervalMs: number, retryAfterMs = 0): number {
  return now + Math.max(intervalMs, retryAfterMs);
}

/** How long to wait before the next edit: zero once `nextAt` has passed. */
export function editDelay(now: number, nextAt: number): number {
  return Math.max(0, nextAt - now);
}

/**
 * A mrkdwn text object that Slack shows as written: `verbatim` stops Slack from turning plain
 * `@here` or a channel name into a live mention, while the links the text spells out stay links.
 */
const mrkdwnText = (text: string) => ({ type: 'mrkdwn', text, verbatim: true });

/** Block Kit of the message while the run works: the text, and the Cancel button carrying the run id. */
export function progressBlocks(text: string, runId: string): Record<string, unknown>[] {
  return [
    { type: 'section', text: mrkdwnText(text) },
    {
      type: 'actions',
      elements: [
        {
          type: 'button',
          action_id: CANCEL_ACTION_ID,
          text: { type: 'plain_text', text: 'Cancel' },
          style: 'danger',
          value: runId,
        },
      ],
    },
  ];
}

/** What the first message says once its run's answer went out as new replies instead (its edit was refused). */
export const SUPERSEDED_TEXT = 'The answer is in the replies below.';

/** What the first message says once the answer streamed in the reply below it (its Cancel button goes). */
export const STREAMED_TEXT = 'Done: the answer is in the reply below.';

/** The same, once the answer streamed in several replies, one after another. */
export const STREAMED_PARTS_TEXT = 'Done: the answer is in the replies below.';

/** Block Kit of a finished message: the text alone (the Cancel button goes). */
export function finalBlocks(text: string): Record<string, unknown>[] {
  return [{ type: 'section', text: mrkdwnText(text) }];
}

/**
 * What mrkdwn must keep whole: an escape entity (`&lt;`…) and a link (`<url|label>`, the only
 * `<` left in escaped text). Cut in two, a part would show a stray `&l` or lose its link.
 */
const UNCUTTABLE = /&(?:[a-z]+|#[0-9]+|#x[0-9a-f]+);|<[^<>]*>/gi;

/**
 * For each position up to `limit`, where a cut there would have to go instead: the position
 * itself, or the start of the entity or link it falls inside.
 */
function cutPositions(text: string, limit: number): Int32Array {
  const positions = Int32Array.from({ length: limit + 1 }, (_, at) => at);
  for (const match of text.matchAll(UNCUTTABLE)) {
    if (match.index >= limit) break;
    const end = Math.min(match.index + match[0].length - 1, limit);
    for (let at = match.index + 1; at <= end; at++) positions[at] = match.index;
  }
  return positions;
}

/** The last position at or before `limit` where `text` can be cut (zero when an entity or link reaching past it opens it). */
function lastCutBefore(text: string, limit: number): number {
  return cutPositions(text, limit)[limit]!;
}

/**
 * A link too long for any part, as plain text: its label and its URL (both already escaped),
 * so the part can be cut anywhere between entities.
 */
function unlinked(text: string): string {
  return text.replace(/^<([^<>|]*)(?:\|([^<>]*))?>/, (_, url: string, label?: string) => (label ? `${label} (${url})` : url));
}

/** A text with where it can be cut up to `limit` (`positions`, from cutPositions). */
interface Cuttable {
  text: string;
  limit: number;
  positions: Int32Array;
}

/** The last index of `char` in `text` before `limit`, in its second half, where a cut may go; or -1. */
function lastCutAt({ text, limit, positions }: Cuttable, char: string): number {
  for (let at = text.lastIndexOf(char, limit - 1); at >= limit / 2; at = text.lastIndexOf(char, at - 1)) {
    if (positions[at] === at) return at;
  }
  return -1;
}

/** A code fence: a part cut inside one closes it and the next part opens it again. */
const FENCE = '```';

/**
 * Cuts mrkdwn into parts of at most `limit` characters, at the last line break (or else space)
 * in a part's second half, so words and lines stay whole where they can, and never inside an
 * escape entity or a link (a link longer than a part is written out as text). A part that ends
 * inside a code fence closes it, and the next part reopens it, so every part renders as code
 * where the answer did.
 */
export function splitMessage(text: string, limit = MESSAGE_TEXT_LIMIT): string[] {
  const parts: string[] = [];
  // Room for the fence a part may have to close.
  const room = text.includes(FENCE) ? limit - FENCE.length - 1 : limit;
  let rest = text;
  while (rest.length > limit) {
    const positions = cutPositions(rest, room);
    const cuttable = { text: rest, limit: room, positions };
    const newline = lastCutAt(cuttable, '\n');
    const space = lastCutAt(cuttable, ' ');
    let cut = newline >= 0 ? newline : space >= 0 ? space : positions[room]!;
    if (cut === 0 && rest.startsWith('<')) {
      rest = unlinked(rest);
      continue;
    }
    // Only a part shorter than an entity (a few characters) cannot hold the entity it starts with.
    if (cut === 0) cut = rest.indexOf(';') + 1;
    const part = rest.slice(0, cut).trimEnd();
    rest = rest.slice(cut).replace(/^[\n ]/, '');
    const insideFence = part.split(FENCE).length % 2 === 0;
    parts.push(insideFence ? `${part}\n${FENCE}` : part);
    if (insideFence) rest = `${FENCE}\n${rest}`;
  }
  parts.push(rest);
  return parts.filter((part, index) => part.length > 0 || index === 0);
}
