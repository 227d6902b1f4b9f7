/**
 * A run's thread context: the thread's earlier messages, oldest first, bounded by a number of
 * messages and of characters with the newest kept (SLACK_CONTEXT_MAX_MESSAGES,
 * SLACK_CONTEXT_MAX_CHARS). Pure: the activity (activities/slack-conversation.ts) reads what the
 * service holds, adds what one conversations.replies call could give, and bounds it here.
 */
import type { RunContextMessage } from '../runs/contract';

export interface ContextLimits {
  maxMessages: number;
  maxChars: number;
}

/** Slack's ts orders a channel's messages: seconds, then microseconds. */
export function compareTs(a: string, b: string): number {
  const [as, au = '0'] = a.split('.');
  const [bs, bu = '0'] = b.split('.');
  return Number(as) - Number(bs) || Number(au.padEnd(6, '0')) - Number(bu.padEnd(6, '0'));
}

/**
 * The messages before `beforeTs`, oldest first, one per ts (the first source wins: what the service
 * holds before what Slack returned), within the limits with the newest kept. A newest message
 * longer than the whole budget keeps its end.
 */
export function boundContext(sources: RunContextMessage[][], beforeTs: string, limits: ContextLimits): RunContextMessage[] {
  const byTs = new Map<string, RunContextMessage>();
  for (const source of sources) for (const message of source) if (!byTs.has(message.ts)) byTs.set(message.ts, message);
  const earlier = [...byTs.values()]
    .filter((m) => compareTs(m.ts, beforeTs) < 0 && m.text.trim() !== '')
    .sort((a, b) => compareTs(b.ts, a.ts));
  const kept: RunContextMessage[] = [];
  let chars = 0;
  for (const message of earlier) {
    if (kept.length >= limits.maxMessages) break;
    const room = limits.maxChars - chars;
    if (message.text.length > room) {
      if (kept.length === 0 && room > 0) kept.push({ ...message, text: message.text.slice(-room) });
      break;
    }
    kept.push(message);
    chars += message.text.length;
  }
  return kept.reverse();
}

/**
 * A conversations.replies page as context messages: each with its user, whether a bot wrote it
 * (a `bot_id`, or the service's own bot user), its text and ts.
 */
export function contextFromReplies(page: Record<string, unknown>, botUserId: string | null): RunContextMessage[] {
  const messages = Array.isArray(page.messages) ? (page.messages as Record<string, unknown>[]) : [];
  return messages.flatMap((message) => {
    if (typeof message.ts !== 'string' || typeof message.text !== 'string') return [];
    const userId = typeof message.user === 'string' ? message.user : null;
    const bot = message.bot_id !== undefined || (userId !== null && userId === botUserId);
    return [{ userId, bot, text: message.text, ts: message.ts }];
  });
}
