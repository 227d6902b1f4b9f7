/**
 * Slack's surface for AI apps (https://docs.slack.dev/ai/developing-agents): the suggested prompts
 * of the app's thread, the status line while a run works, and the thread's title. Pure: the
 * workflow and the activities share these texts and rules.
 *
 * The generated manifest declares the current *agent* experience (`agent_view`); apps made from
 * an older manifest may still declare the legacy *assistant* experience (`assistant_view`). Both
 * are served: see src/slack/conversation.ts `surfaceOf`.
 */

export interface SuggestedPrompt {
  title: string;
  message: string;
}

/** Slack shows up to four suggested prompts (assistant.threads.setSuggestedPrompts). */
export const MAX_SUGGESTED_PROMPTS = 4;

/** What a connection offers until an admin sets its own (`PATCH …/connections/{id}` `suggestedPrompts`). */
export const DEFAULT_SUGGESTED_PROMPTS: readonly SuggestedPrompt[] = [
  { title: 'What can you do?', message: 'What can you do for me from Slack?' },
  { title: 'Summarize my recent changes', message: 'Summarize the changes on my current branch.' },
  { title: 'Explain a failing test', message: 'Why is the last failing test failing, and how do I fix it?' },
];

/** The prompts a connection offers: its own, else the defaults. */
export function promptsOf(stored: unknown): SuggestedPrompt[] {
  if (!Array.isArray(stored) || stored.length === 0) return [...DEFAULT_SUGGESTED_PROMPTS];
  return (stored as SuggestedPrompt[]).slice(0, MAX_SUGGESTED_PROMPTS);
}

/** The status line while the run works (Slack shows it after the app's name), or with the tool the run is using. */
export function assistantStatus(tool?: string): string {
  return tool ? `is using ${tool.slice(0, 80)}…` : 'is working on it…';
}

/** A thread's title from its first ask: the first line, at most 60 characters. */
export function threadTitle(text: string): string {
  const line = text.trim().split('\n')[0]!.replace(/\s+/g, ' ');
  if (line === '') return 'A question for den';
  return line.length <= 60 ? line : `${line.slice(0, 59)}…`;
}

/**
 * What Slack answers when the app may not use a method: the feature is not enabled for the app, or
 * its token lacks the scope. Once seen, the connection keeps to plain thread messages until its bot
 * token is replaced.
 */
const ASSISTANT_REFUSALS = new Set(['not_allowed', 'missing_scope', 'not_allowed_token_type', 'unknown_method', 'method_deprecated']);

export const isAssistantRefusal = (error: string): boolean => ASSISTANT_REFUSALS.has(error);
