/**
 * How the Slack activities reach Slack: each call with the connection's bot token, within the
 * workspace's budget (src/slack/budget.ts), counted; and the one look for an earlier attempt's
 * post, by the key its metadata carries, that a retried post makes before it posts once more.
 */
import type { Db } from '../app/store/db';
import type { SecretKeys } from '../app/secrets';
import type { Logger } from '../app/log';
import { SlackBudget, type BudgetPriority, type BudgetVerdict } from './budget';
import { findSlackConnection, type SlackConnection } from './connections';
import type { SlackSettings } from './settings';
import { callSlackApi, findReplies, type SlackApiMethod, type SlackApiResult } from './web-api';

/** What the Slack calls need; the activities hand it over. */
export interface SlackCallDeps {
  db: Db;
  secretKey: SecretKeys;
  settings: Pick<SlackSettings, 'apiBaseUrl'>;
  log: Logger;
  budget: SlackBudget;
  /** Counts a message call (den_slack_messages_total) and shows a bucket's tokens (den_slack_budget_tokens). */
  observe: {
    call(method: SlackApiMethod, outcome: string): void;
    budget(connectionId: string, method: SlackApiMethod, priority: BudgetPriority, verdict: BudgetVerdict): void;
  };
}

/** Errors no other call to the same place can get past: the token or the channel is gone. */
const CONNECTION_ERRORS = new Set([
  'not_in_channel',
  'channel_not_found',
  'invalid_auth',
  'account_inactive',
  'token_revoked',
  'not_authed',
  'is_archived',
]);

export const isConnectionError = (error: string): boolean => CONNECTION_ERRORS.has(error);

/** A connection the service may post for, or why not. */
export type Postable =
  { connection: SlackConnection & { botToken: string } } | { skipped: 'no_connection' | 'connection_disabled' | 'no_bot_token' };

export async function postableConnection(deps: Pick<SlackCallDeps, 'db' | 'secretKey'>, connectionId: string): Promise<Postable> {
  const connection = await findSlackConnection(deps.db, deps.secretKey, connectionId);
  if (!connection) return { skipped: 'no_connection' };
  if (!connection.enabled) return { skipped: 'connection_disabled' };
  if (!connection.botToken) return { skipped: 'no_bot_token' };
  return { connection: connection as SlackConnection & { botToken: string } };
}

/** The outcome label of a call in den_slack_messages_total. */
function callOutcome(result: SlackApiResult, budgeted: boolean): string {
  if (result.ok) return 'ok';
  if (!budgeted && result.error === 'ratelimited') return 'budget_wait';
  return result.error === 'ratelimited' || result.error === 'message_not_found' ? result.error : 'failed';
}

/**
 * One Web API call within the workspace's budget. Without a token it is not sent and answers as
 * a 429 would (`ratelimited`, with the wait); a 429 from Slack empties the bucket for its wait.
 */
export async function sendWithin(
  deps: SlackCallDeps,
  connection: { id: string; botToken: string },
  method: SlackApiMethod,
  body: Record<string, unknown>,
  priority: BudgetPriority,
): Promise<SlackApiResult> {
  const verdict = await deps.budget.take(connection.id, method, priority);
  deps.observe.budget(connection.id, method, priority, verdict);
  if (!verdict.taken) {
    const waited: SlackApiResult = { ok: false, retryable: true, error: 'ratelimited', retryAfterMs: verdict.waitMs };
    if (method !== 'conversations.replies') deps.observe.call(method, callOutcome(waited, false));
    return waited;
  }
  const result = await callSlackApi({ baseUrl: deps.settings.apiBaseUrl, token: connection.botToken }, method, body);
  if (!result.ok && result.error === 'ratelimited') await deps.budget.drain(connection.id, method, result.retryAfterMs ?? 1000);
  if (method !== 'conversations.replies') deps.observe.call(method, callOutcome(result, true));
  return result;
}

/** How far before the first attempt a retry looks for its post: room for Slack's clock and ours to differ. */
const LOOKBACK_SECONDS = 60;
/** What Slack gives a commercially distributed app off the Marketplace in one conversations.replies call. */
const LOOKUP_LIMIT = 15;

/**
 * Our posts in the thread since `since` (ms), by the key their metadata carries: one call of
 * conversations.replies, never a scan. `unknown` when Slack cannot tell (a 429 included): the
 * caller then posts once more, with the same metadata.
 */
export async function earlierPosts(
  deps: SlackCallDeps,
  connection: { id: string; botToken: string },
  thread: { channel: string; threadTs: string; since: number },
): Promise<Map<string, string> | 'unknown'> {
  const oldest = Math.max(0, Math.floor(thread.since / 1000) - LOOKBACK_SECONDS);
  const result = await sendWithin(
    deps,
    connection,
    'conversations.replies',
    { channel: thread.channel, ts: thread.threadTs, oldest: `${oldest}.000000`, limit: LOOKUP_LIMIT, include_all_metadata: true },
    'final',
  );
  if (!result.ok) {
    deps.log.warn({ connectionId: connection.id, error: result.error }, 'slack: could not look for an earlier post; posting once more');
    return 'unknown';
  }
  return findReplies(result.body);
}
