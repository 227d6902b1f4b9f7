/**
 * One budget per workspace for Slack's rate-limited Web API methods, shared by every worker
 * replica: a token bucket per (connection, method) in Postgres, since Slack counts each method's
 * calls per workspace and app (https://docs.slack.dev/apis/web-api/rate-limits). A call that finds
 * no token is not sent: the caller is told how long to wait, and the workflow waits on a timer.
 *
 * Slack counts calls per minute without saying how; the bucket keeps to any window of that length:
 * it holds at most `capacity` tokens and refills at (limit − capacity) per window, so no window
 * sees more than `limit` calls. Final answers and cancellations go first: a progress edit takes a
 * token only while more than `reserve` are left, which keeps them for a final one.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';

/** A final answer or a cancellation, or a progress edit that a newer one may replace. */
export type BudgetPriority = 'final' | 'progress';

export interface BucketLimits {
  capacity: number;
  /** Tokens per millisecond. */
  refillPerMs: number;
  /** Tokens a progress edit leaves for final ones. */
  reserve: number;
}

interface BucketState {
  tokens: number;
  at: number;
}

/** The bucket that keeps a method to `limit` calls per `windowMs`: a fifth of it as burst, half of that kept for finals. */
export function bucketLimits(limit: number, windowMs: number): BucketLimits {
  const capacity = Math.max(1, Math.floor(limit / 5));
  return { capacity, refillPerMs: Math.max(limit - capacity, 1) / windowMs, reserve: Math.floor(capacity / 2) };
}

function refilled(state: BucketState | undefined, now: number, limits: BucketLimits): number {
  if (!state) return limits.capacity;
  return Math.min(limits.capacity, state.tokens + Math.max(0, now - state.at) * limits.refillPerMs);
}

/** A bucket as it stands now: its stored state (none before its first call) and its limits. */
export interface BucketNow {
  state: BucketState | undefined;
  now: number;
  limits: BucketLimits;
}

/** One token for a call of this priority now, or how long until there is one. */
export function takeToken(
  { state, now, limits }: BucketNow,
  priority: BudgetPriority,
): { taken: true; next: BucketState } | { taken: false; waitMs: number; next: BucketState } {
  const tokens = refilled(state, now, limits);
  const needed = 1 + (priority === 'progress' ? limits.reserve : 0);
  if (tokens >= needed) return { taken: true, next: { tokens: tokens - 1, at: now } };
  return { taken: false, waitMs: Math.ceil((needed - tokens) / limits.refillPerMs), next: { tokens, at: now } };
}

/** Slack answered 429 all the same (another process, another app): nothing is sent before `retryAfterMs` has passed. */
export function drainToken({ state, now, limits }: BucketNow, retryAfterMs: number): BucketState {
  return { tokens: Math.min(refilled(state, now, limits), 1 - retryAfterMs * limits.refillPerMs), at: now };
}

/** Slack's tier of each rate-limited method the service calls; chat.postMessage has its own rule (about one a second per channel). */
const METHOD_TIERS: Record<string, 2 | 3 | 4> = {
  'chat.update': 3,
  'chat.delete': 3,
  'conversations.replies': 3,
  'chat.postEphemeral': 4,
  'chat.startStream': 2,
  'chat.stopStream': 2,
  'chat.appendStream': 4,
  // The agent surface and the Home tab: Tier 4 (setSuggestedPrompts, setTitle, views.publish); Slack
  // says only "special" of setStatus and chat.getPermalink, which are counted as Tier 4 too.
  'assistant.threads.setStatus': 4,
  'assistant.threads.setSuggestedPrompts': 4,
  'assistant.threads.setTitle': 4,
  'views.publish': 4,
  'chat.getPermalink': 4,
};

export interface BudgetSettings {
  windowMs: number;
  tiers: Record<2 | 3 | 4, number>;
}

export type BudgetVerdict = { taken: true; tokens: number } | { taken: false; waitMs: number; tokens: number };

/** Reads, decides and writes one bucket under its row lock, on the database's clock (every replica's the same); channel pacing (src/slack/pacing.ts) keeps its schedules in the same rows. */
export async function withBucket(
  db: Db,
  key: { connectionId: string; method: string },
  decide: (state: BucketState | undefined, now: number) => { next: BucketState; verdict: BudgetVerdict },
): Promise<BudgetVerdict> {
  return db.transaction().execute(async (trx) => {
    await trx
      .insertInto('slack_api_budgets')
      .values({ connection_id: key.connectionId, method: key.method, tokens: Number.NaN, refreshed_at: new Date(0) })
      .onConflict((oc) => oc.doNothing())
      .execute();
    const row = await trx
      .selectFrom('slack_api_budgets')
      .select(['tokens', 'refreshed_at', sql<Date>`clock_timestamp()`.as('now')])
      .where('connection_id', '=', key.connectionId)
      .where('method', '=', key.method)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const state = Number.isNaN(row.tokens) ? undefined : { tokens: row.tokens, at: row.refreshed_at.getTime() };
    const { next, verdict } = decide(state, row.now.getTime());
    await trx
      .updateTable('slack_api_budgets')
      .set({ tokens: next.tokens, refreshed_at: new Date(next.at) })
      .where('connection_id', '=', key.connectionId)
      .where('method', '=', key.method)
      .execute();
    return verdict;
  });
}

/** The workspace budget of the methods that have one (METHOD_TIERS); other methods always pass. */
export class SlackBudget {
  constructor(
    private readonly db: Db,
    private readonly settings: BudgetSettings,
  ) {}

  limitsOf(method: string): BucketLimits | undefined {
    const tier = METHOD_TIERS[method];
    return tier === undefined ? undefined : bucketLimits(this.settings.tiers[tier], this.settings.windowMs);
  }

  async take(connectionId: string, method: string, priority: BudgetPriority): Promise<BudgetVerdict> {
    const limits = this.limitsOf(method);
    if (!limits) return { taken: true, tokens: Number.POSITIVE_INFINITY };
    return withBucket(this.db, { connectionId, method }, (state, now) => {
      const taken = takeToken({ state, now, limits }, priority);
      const verdict: BudgetVerdict = taken.taken
        ? { taken: true, tokens: taken.next.tokens }
        : { taken: false, waitMs: taken.waitMs, tokens: taken.next.tokens };
      return { next: taken.next, verdict };
    });
  }

  /** Slack rate-limited a call all the same: the bucket is emptied for its Retry-After. */
  async drain(connectionId: string, method: string, retryAfterMs: number): Promise<void> {
    const limits = this.limitsOf(method);
    if (!limits) return;
    await withBucket(this.db, { connectionId, method }, (state, now) => {
      const next = drainToken({ state, now, limits }, retryAfterMs);
      return { next, verdict: { taken: false, waitMs: retryAfterMs, tokens: next.tokens } };
    });
  }
}
