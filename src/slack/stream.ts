/**
 * What an invocation's streamed answer says (Slack's chat.startStream, chat.appendStream,
 * chat.stopStream): the runtime's Markdown, escaped so that it cannot mention anyone, appended as
 * it grows; the tools the run uses as task updates; the outcome at the end. Pure and free of Node
 * imports: the slack-event workflow uses it.
 */
import type { RunProgress, RunSummary } from '../runs/contract';
import { runReplyText } from './texts';

/** What one streaming call takes of `markdown_text` (https://docs.slack.dev/reference/methods/chat.appendStream). */
export const STREAM_CALL_LIMIT = 12_000;

export type StreamChunk =
  | { type: 'task_update'; id: string; title: string; status: 'pending' | 'in_progress' | 'complete' | 'error' }
  | { type: 'markdown_text'; text: string };

/**
 * Markdown as Slack shows it literally where a mention could start: `&`, `<` and `>` escaped, so
 * `<!channel>`, `<@U…>` or `<#C…>` arrive as text (the last guard, src/slack/web-api.ts, also
 * defuses a plain `@channel`). A `>` that opens a line stays: it is a block quote.
 */
export function escapeMarkdown(text: string): string {
  return text
    .split('\n')
    .map((line) => {
      const quote = /^[ \t]*(?:>[ \t]?)*/.exec(line)![0];
      const rest = line.slice(quote.length).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
      return quote + rest;
    })
    .join('\n');
}

/** What the stream shows of the runtime's text so far: the latest text whose whole was appended. */
export interface StreamedText {
  source: string;
}

/**
 * What to append for the runtime's newest text: the part after what was streamed when it carries
 * on from it, else the new text as a paragraph of its own (a runtime may report separate
 * messages). Escaped.
 */
export function streamDelta(streamed: StreamedText, next: string): { append: string; streamed: StreamedText } {
  if (next === streamed.source || streamed.source.startsWith(next)) return { append: '', streamed };
  if (next.startsWith(streamed.source)) return { append: escapeMarkdown(next.slice(streamed.source.length)), streamed: { source: next } };
  return { append: `${streamed.source === '' ? '' : '\n\n'}${escapeMarkdown(next)}`, streamed: { source: next } };
}

/** The most characters of a tool's name a task's title shows: titles count toward what one streamed message holds (src/slack/stream-segments.ts). */
export const TOOL_NAME_LIMIT = 200;

/** A tool the run uses, as a task in the stream's timeline. */
export function toolTask(id: string, tool: string, status: 'in_progress' | 'complete'): StreamChunk {
  const chars = Array.from(tool);
  const name = chars.length > TOOL_NAME_LIMIT ? `${chars.slice(0, TOOL_NAME_LIMIT).join('')}…` : tool;
  return { type: 'task_update', id, title: `Using ${escapeMarkdown(name)}`, status };
}

/** What a progress report adds to the stream: its text's delta, or a task for its tool. */
export function progressStep(
  streamed: StreamedText,
  progress: Pick<RunProgress, 'text' | 'tool' | 'sequence'>,
  openTask: string | null,
): { append: string; chunks: StreamChunk[]; streamed: StreamedText; openTask: string | null } {
  const close: StreamChunk[] = openTask ? [{ type: 'task_update', id: openTask, title: 'Done', status: 'complete' }] : [];
  if (progress.text?.trim()) {
    const delta = streamDelta(streamed, progress.text);
    return { append: delta.append, chunks: close, streamed: delta.streamed, openTask: null };
  }
  if (progress.tool) {
    const id = `tool-${progress.sequence}`;
    return { append: '', chunks: [...close, toolTask(id, progress.tool, 'in_progress')], streamed, openTask: id };
  }
  return { append: '', chunks: [], streamed, openTask };
}

/**
 * What closes the stream: the rest of the answer after what was streamed, and, for a run that did
 * not succeed, why (escaped).
 */
export function finalMarkdown(streamed: StreamedText, summary: Pick<RunSummary, 'status' | 'error' | 'lastAssistantText'>): string {
  const answer = summary.lastAssistantText?.trim() ? streamDelta(streamed, summary.lastAssistantText).append : '';
  const shown = streamed.source !== '' || answer !== '';
  if (summary.status === 'succeeded') return shown ? answer : runReplyText(summary);
  const why = runReplyText({ ...summary, lastAssistantText: null });
  return `${answer}${shown ? '\n\n' : ''}${why}`;
}

/** The escape entity `&…;` a cut must not fall inside. */
const ENTITY = /&(?:[a-z]+|#[0-9]+|#x[0-9a-f]+);/gi;

/**
 * Where to cut escaped Markdown that runs past `limit` characters: at the last line break or
 * space in the first `limit` characters' second half (else at `limit`), and never inside an escape
 * entity.
 */
export function cutBefore(text: string, limit: number): number {
  let cut = Math.max(text.lastIndexOf('\n', limit - 1), text.lastIndexOf(' ', limit - 1)) + 1;
  if (cut < limit / 2) cut = limit;
  for (const match of text.slice(0, limit + 10).matchAll(ENTITY)) {
    if (match.index < cut && match.index + match[0].length > cut) cut = match.index;
  }
  return cut;
}

/**
 * Escaped Markdown in pieces of at most `limit` characters for consecutive calls of one stream
 * (they join back into one message), each cut by cutBefore.
 */
export function markdownPieces(text: string, limit = STREAM_CALL_LIMIT): string[] {
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    const cut = cutBefore(rest, limit);
    pieces.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  if (rest !== '' || pieces.length === 0) pieces.push(rest);
  return pieces;
}
