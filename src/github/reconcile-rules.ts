/**
 * The reconcile's rules, pure: which part of the App's delivery log to read (each window overlaps
 * the last, and a listing cut short by its page cap goes on from its cursor next time), which
 * failed deliveries to ask GitHub to redeliver and how often, and whether a target's branch moved
 * without us.
 */
import type { HookDelivery } from './api';

/** GitHub keeps (and redelivers) an App's deliveries for three days. */
export const DELIVERY_LOG_WINDOW_MS = 3 * 24 * 3600_000;
/**
 * How far each listing reaches back before the previous one started. GitHub waits up to 10 s for
 * an answer and logs a delivery when it was sent, so one in flight at a listing, or a clock a few
 * minutes off, is still read by the next; the GUID record makes reading it twice harmless.
 */
export const DELIVERY_WINDOW_OVERLAP_MS = 15 * 60_000;

/** Where the last reconcile left the delivery log. */
export interface ListingState {
  /** When the last listing from the top of the log started (it read, or carried, everything down to its lower bound). */
  lastRunAt?: number;
  /** A listing stopped by the page cap: its next page, and the bound it must still reach. */
  carried: { cursor: string; untilMs: number } | null;
}

/** What one reconcile reads: first the carried part (if any), then the top of the log down to `topUntilMs`. */
export interface ListingPlan {
  carried: { cursor: string; untilMs: number } | null;
  topUntilMs: number;
}

/** Never further back than GitHub still redelivers; each window overlaps the previous one by DELIVERY_WINDOW_OVERLAP_MS. */
export function listingPlan(state: ListingState, now: number): ListingPlan {
  const oldest = now - DELIVERY_LOG_WINDOW_MS;
  const topUntilMs = Math.max(oldest, (state.lastRunAt ?? 0) - DELIVERY_WINDOW_OVERLAP_MS);
  const carried = state.carried && { cursor: state.carried.cursor, untilMs: Math.max(oldest, state.carried.untilMs) };
  return { carried, topUntilMs };
}

/**
 * The state after a reconcile, from how far each walk got (`next`: the cursor where the page cap
 * stopped it, null when it reached its bound). A carried walk that stops again keeps its bound and
 * leaves the top for later (its lower bound does not move); a top walk that ran moves the top to
 * this run's start, and carries what the cap left of it.
 */
export function nextListingState(
  state: ListingState,
  plan: ListingPlan,
  run: { startedAt: number; carried?: { next: string | null }; top?: { next: string | null } },
): ListingState {
  if (plan.carried && run.carried?.next) {
    return { lastRunAt: state.lastRunAt, carried: { cursor: run.carried.next, untilMs: plan.carried.untilMs } };
  }
  if (!run.top) return { lastRunAt: state.lastRunAt, carried: null };
  return { lastRunAt: run.startedAt, carried: run.top.next ? { cursor: run.top.next, untilMs: plan.topUntilMs } : null };
}

/** A carried cursor GitHub no longer takes: the next top walk reaches down to the carried bound instead. */
export function dropCarried(state: ListingState): ListingState {
  if (!state.carried) return state;
  const reach = state.carried.untilMs + DELIVERY_WINDOW_OVERLAP_MS;
  return { lastRunAt: Math.min(state.lastRunAt ?? reach, reach), carried: null };
}

/** What one attempt of a delivery came to, as GitHub's log shows it (its status code, 0 when nothing answered). */
export type AttemptClass = 'delivered' | 'server_error' | 'unreachable' | 'refused';

export function attemptClass(statusCode: number): AttemptClass {
  if (statusCode >= 200 && statusCode < 300) return 'delivered';
  if (statusCode === 0) return 'unreachable';
  return statusCode >= 500 ? 'server_error' : 'refused';
}

/**
 * Whether our own answer to an attempt was a refusal to come back later: 503 `overloaded` (the
 * organization past its share) or `busy` (the process holding as many unchecked bodies as it
 * may). The reconcile is how those come back, so they never count toward a GUID's cap.
 */
export function isShedAnswer(statusCode: number, body: string | null): boolean {
  if (statusCode !== 503 || body === null) return false;
  try {
    const error = (JSON.parse(body) as { error?: unknown }).error;
    return error === 'overloaded' || error === 'busy';
  } catch {
    return false;
  }
}

/** The newest attempt of each GUID in a listing, and whether any of its listed attempts was delivered. */
export function newestAttempts(deliveries: readonly HookDelivery[]): Map<string, { newest: HookDelivery; delivered: boolean }> {
  const byGuid = new Map<string, { newest: HookDelivery; delivered: boolean }>();
  for (const delivery of deliveries) {
    const seen = byGuid.get(delivery.guid);
    const delivered = (seen?.delivered ?? false) || attemptClass(delivery.statusCode) === 'delivered';
    const newest = !seen || delivery.id > seen.newest.id ? delivery : seen.newest;
    byGuid.set(delivery.guid, { newest, delivered });
  }
  return byGuid;
}

/**
 * How a GUID the reconcile tried stands: asked again, delivered since, given up at its cap,
 * refused by us (a 4xx) or by GitHub for good, an ask GitHub failed to take (a 422 or a 5xx:
 * asked again next run), or an ask decided but not made yet (`waiting`: the run's cap, the App's
 * budget or a rate limit stopped the run first).
 */
export type RedeliveryOutcome = 'asked' | 'delivered' | 'capped' | 'rejected' | 'ask_refused' | 'ask_failed' | 'waiting';

/** What is kept of a GUID the reconcile tried (`github_redeliveries`). */
export interface RedeliveryRecord {
  lastAttemptId: number;
  /** The attempt the last ask redelivered. */
  askedAttemptId: number | null;
  /** Asks that count toward the cap: those of attempts that failed with a 5xx, a timeout or a connection error, and every ask GitHub failed to take. */
  tries: number;
  outcome: RedeliveryOutcome;
}

export type RedeliveryDecision =
  | { action: 'none' }
  | { action: 'record'; outcome: RedeliveryOutcome }
  /** Ask GitHub to redeliver `attemptId`; `counted` unless the attempt was our own refusal to come back later. */
  | { action: 'ask'; attemptId: number; counted: boolean };

/** An ask this GUID is owed from an earlier run: decided but not made, or made and not taken by GitHub. */
const OWED: readonly RedeliveryOutcome[] = ['waiting', 'ask_failed'];

/**
 * One GUID's decision from its newest attempt (`shed`: our answer to it was 503 overloaded or
 * busy). Only a GUID whose newest attempt failed with a 5xx, a timeout or a connection error is
 * asked for, once per failed attempt, at most `maxTries` times counted; a delivered GUID never
 * again, and a 4xx (the service refused the delivery itself) never. An ask owed from an earlier
 * run is made again until the GUID reaches its cap (a failed ask counts, so GitHub answering 422
 * for ever cannot keep a GUID asked for ever).
 */
export function decideRedelivery(
  record: RedeliveryRecord | undefined,
  seen: { newest: { id: number; statusCode: number }; delivered: boolean; shed: boolean },
  maxTries: number,
): RedeliveryDecision {
  const { newest } = seen;
  if (record && newest.id <= record.lastAttemptId) {
    if (!OWED.includes(record.outcome)) return { action: 'none' };
    if (record.tries >= maxTries && (record.outcome === 'ask_failed' || !seen.shed)) return { action: 'record', outcome: 'capped' };
    return { action: 'ask', attemptId: record.lastAttemptId, counted: !seen.shed };
  }
  if (seen.delivered) return record ? { action: 'record', outcome: 'delivered' } : { action: 'none' };
  const kind = attemptClass(newest.statusCode);
  if (kind === 'refused') return record ? { action: 'record', outcome: 'rejected' } : { action: 'none' };
  if (seen.shed) return { action: 'ask', attemptId: newest.id, counted: false };
  if ((record?.tries ?? 0) >= maxTries) return { action: 'record', outcome: 'capped' };
  return { action: 'ask', attemptId: newest.id, counted: true };
}

/** A head that is neither the synced one nor one waiting for its sync was moved without a delivery we kept. */
export function headDrifted(head: string, target: { syncedSha: string | null; pendingSha: string | null }): boolean {
  return head !== target.syncedSha && head !== target.pendingSha;
}
