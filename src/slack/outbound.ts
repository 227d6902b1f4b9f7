/**
 * How the Slack activities reach Slack: each call with the connection's bot token (refreshed first
 * when it rotates and is due, src/slack/tokens.ts), within the workspace's budget
 * (src/slack/budget.ts), a post at its channel's pace (src/slack/pacing.ts), counted; and the one
 * look for an earlier attempt's post, by the key its metadata carries, that a retried post makes
 * before it posts once more.
 */
import type { Db } from '../app/store/db';
import type { SecretKeys } from '../app/secrets';
import type { Logger } from '../app/log';
import { SlackBudget, type BudgetPriority, type BudgetVerdict } from './budget';
import { findSlackConnection, type SlackConnection } from './connections';
import type { ChannelPacer } from './pacing';
import type { SlackSettings } from './settings';
import { dueBotToken, freshBotToken, type TokenLifetime } from './tokens';
import { callSlackApi, findReplies, type SlackApiMethod, type SlackApiResult } from './web-api';

/** What the Slack calls need; the activities hand it over. */
export interface SlackCallDeps {
  db: Db;
  secretKey: SecretKeys;
  settings: Pick<SlackSettings, 'apiBaseUrl'>;
  log: Logger;
  budget: SlackBudget;
  /** Posts to one channel at Slack's pace, across every worker. */
  pacer: ChannelPacer;
  /** Counts a message call (den_slack_messages_total) and shows a bucket's tokens (den_slack_budget_tokens). */
  observe: {
    call(method: SlackApiMethod, outcome: string): void;
    budget(take: BudgetTake, verdict: BudgetVerdict): void;
  };
}

/** One Web API call: the method, its arguments, and whether it is a final answer or progress that may wait. */
export interface SlackCall {
  method: SlackApiMethod;
  body: Record<string, unknown>;
  priority: BudgetPriority;
}

/** A token asked of a workspace's budget: the connection, the method, and the call's priority. */
export interface BudgetTake {
  connectionId: string;
  method: SlackApiMethod;
  priority: BudgetPriority;
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
  // Once a refresh and one more try did not help (src/slack/tokens.ts), an expired token is the connection's.
  'token_expired',
]);

/** Answers that may mean the token changed under the call: a rotating connection looks for a fresh one and tries once more. */
const AUTH_ERRORS = new Set(['token_expired', 'invalid_auth', 'token_revoked']);

export const isConnectionError = (error: string): boolean => CONNECTION_ERRORS.has(error);

/** A connection the service may post for, or why not. */
export type Postable =
  { connection: SlackConnection & { botToken: string } } | { skipped: 'no_connection' | 'connection_disabled' | 'no_bot_token' };

/** What finding a fresh token needs. */
type TokenCallDeps = Pick<SlackCallDeps, 'db' | 'secretKey' | 'log'> & { settings: Pick<SlackSettings, 'apiBaseUrl'> };

const tokenDeps = (deps: TokenCallDeps) => ({
  db: deps.db,
  secretKey: deps.secretKey,
  apiBaseUrl: deps.settings.apiBaseUrl,
  log: deps.log,
});

/** The connection, with its bot token refreshed first when it rotates and is due. */
export async function postableConnection(deps: TokenCallDeps, connectionId: string): Promise<Postable> {
  const connection = await findSlackConnection(deps.db, deps.secretKey, connectionId);
  if (!connection) return { skipped: 'no_connection' };
  if (!connection.enabled) return { skipped: 'connection_disabled' };
  if (!connection.botToken) return { skipped: 'no_bot_token' };
  connection.botToken = await dueBotToken(tokenDeps(deps), { ...connection, botToken: connection.botToken });
  return { connection: connection as SlackConnection & { botToken: string } };
}

/** A call's connection: its id and token, and whether the token rotates. */
export type CallConnection = { id: string; botToken: string; tokenLifetime?: TokenLifetime | null };

/** The outcome label of a call Slack answered in den_slack_messages_total (one held back is labelled by what held it). */
function callOutcome(result: SlackApiResult): string {
  if (result.ok) return 'ok';
  return result.error === 'ratelimited' || result.error === 'message_not_found' ? result.error : 'failed';
}

/** A call held back, answered as a 429 would be (`ratelimited`, with the wait), and counted as what held it. */
function heldBack(
  deps: SlackCallDeps,
  method: SlackApiMethod,
  { by, waitMs }: { by: 'budget_wait' | 'channel_wait'; waitMs: number },
): SlackApiResult {
  if (method !== 'conversations.replies') deps.observe.call(method, by);
  return { ok: false, retryable: true, error: 'ratelimited', retryAfterMs: waitMs };
}

/** One token of the workspace's budget for the call, or the answer that holds it back. */
async function takeBudget(deps: SlackCallDeps, take: BudgetTake) {
  const verdict = await deps.budget.take(take.connectionId, take.method, take.priority);
  deps.observe.budget(take, verdict);
  return verdict.taken ? undefined : heldBack(deps, take.method, { by: 'budget_wait', waitMs: verdict.waitMs });
}

/**
 * One Web API call within the workspace's budget, and a post at its channel's pace. Without a
 * budget token, or with its channel's slot too far away, it is not sent and answers as a 429
 * would (`ratelimited`, with the wait); a near slot is waited for here. A 429 from Slack empties
 * the bucket, and holds the channel's posts, for its Retry-After. A rotating token Slack refuses
 * (`token_expired`, or one another process replaced) is refreshed or read again, and the call
 * sent once more, within the budget again.
 */
export async function sendWithin(
  deps: SlackCallDeps,
  connection: CallConnection,
  { method, body, priority }: SlackCall,
): Promise<SlackApiResult> {
  const take = { connectionId: connection.id, method, priority };
  const held = await takeBudget(deps, take);
  if (held) return held;
  const channel = method === 'chat.postMessage' ? String(body.channel) : undefined;
  if (channel !== undefined) {
    const slot = await deps.pacer.reserve(connection.id, channel);
    if (!slot.reserved) return heldBack(deps, method, { by: 'channel_wait', waitMs: slot.waitMs });
    if (slot.waitMs > 0) await new Promise((resolve) => setTimeout(resolve, slot.waitMs));
  }
  let result = await callSlackApi({ baseUrl: deps.settings.apiBaseUrl, token: connection.botToken }, method, body);
  if (!result.ok && AUTH_ERRORS.has(result.error) && connection.tokenLifetime) {
    const fresh = await freshBotToken(tokenDeps(deps), connection.id, result.error === 'token_expired' ? connection.botToken : undefined);
    if (fresh.ok && fresh.token !== connection.botToken) {
      connection.botToken = fresh.token;
      const heldAgain = await takeBudget(deps, take);
      if (heldAgain) return heldAgain;
      result = await callSlackApi({ baseUrl: deps.settings.apiBaseUrl, token: connection.botToken }, method, body);
    }
  }
  if (!result.ok && result.error === 'ratelimited') {
    await deps.budget.drain(connection.id, method, result.retryAfterMs ?? 1000);
    if (channel !== undefined) await deps.pacer.hold(connection.id, channel, result.retryAfterMs ?? 1000);
  }
  if (method !== 'conversations.replies') deps.observe.call(method, callOutcome(result));
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
  connection: CallConnection,
  thread: { channel: string; threadTs: string; since: number },
): Promise<Map<string, string> | 'unknown'> {
  const oldest = Math.max(0, Math.floor(thread.since / 1000) - LOOKBACK_SECONDS);
  const result = await sendWithin(deps, connection, {
    method: 'conversations.replies',
    body: { channel: thread.channel, ts: thread.threadTs, oldest: `${oldest}.000000`, limit: LOOKUP_LIMIT, include_all_metadata: true },
    priority: 'final',
  });
  if (!result.ok) {
    deps.log.warn({ connectionId: connection.id, error: result.error }, 'slack: could not look for an earlier post; posting once more');
    return 'unknown';
  }
  return findReplies(result.body);
}
