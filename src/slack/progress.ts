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

/** What the message shows for a progress report: the newest text, or the tool the run is using. */
export function progressText(progress: Pick<RunProgress, 'text' | 'tool'>): string {
  const text = progress.text?.trim() ? progress.text : progress.tool ? `_using ${escapeMrkdwn(progress.tool)}…_` : WORKING_TEXT;
  return text.length > MESSAGE_TEXT_LIMIT ? `${text.slice(0, MESSAGE_TEXT_LIMIT - 1)}…` : text;
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

/** Block Kit of the message while the run works: the text, and the Cancel button carrying the run id. */
export function progressBlocks(text: string, runId: string): Record<string, unknown>[] {
  return [
    { type: 'section', text: { type: 'mrkdwn', text } },
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

/** Block Kit of a finished message: the text alone (the Cancel button goes). */
export function finalBlocks(text: string): Record<string, unknown>[] {
  return [{ type: 'section', text: { type: 'mrkdwn', text } }];
}

/**
 * Cuts text into parts of at most `limit` characters, at the last line break (or else space)
 * in a part's second half, so words and lines stay whole where they can.
 */
export function splitMessage(text: string, limit = MESSAGE_TEXT_LIMIT): string[] {
  const parts: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    const window = rest.slice(0, limit);
    const newline = window.lastIndexOf('\n');
    const space = window.lastIndexOf(' ');
    const cut = newline >= limit / 2 ? newline : space >= limit / 2 ? space : limit;
    parts.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).replace(/^[\n ]/, '');
  }
  parts.push(rest);
  return parts.filter((part, index) => part.length > 0 || index === 0);
}
