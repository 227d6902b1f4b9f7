/**
 * The reconcile's first half: the App's log of webhook deliveries is read (each window
 * overlapping the last, a listing cut short by its page cap, the App's budget or a rate limit going
 * on from its cursor next time) and each lost delivery asked for again, a bounded number of times
 * per GUID, at the pace the App's budget allows (src/github/app-budget.ts). GitHub's refusals come
 * back as the result's `error`; Postgres failures throw, for the activity to retry.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';
import { asGithubFailure, isGithubCallError, type GithubApi, type HookDelivery } from './api';
import { isPrimaryLimit, isRateLimited } from './api-errors';
import { appBudget, CALL_POINTS, withAppLock, type AppBudget } from './app-budget';
import { githubError, type ReconcileDeps } from './reconcile';
import {
  DELIVERY_LOG_WINDOW_MS,
  decideRedelivery,
  dropCarried,
  isShedAnswer,
  listingPlan,
  newestAttempts,
  nextListingState,
  type ListingState,
  type RedeliveryDecision,
  type RedeliveryOutcome,
  type RedeliveryRecord,
} from './reconcile-rules';

const STATE_ID = 'deliveries';

/** Why a run stopped calling the App's routes before it was done: its cap, the App's budget, a rate limit, or another run. */
export type StoppedBy = 'run_cap' | 'budget' | 'rate_limit' | 'busy';

/** Whether GitHub answered with a rate limit (primary or secondary). */
const rateLimitedAnswer = (error: unknown) => (error as Error)?.name === 'HttpError' && isRateLimited(asGithubFailure(error));

async function loadState(db: Db): Promise<ListingState> {
  const row = await db.selectFrom('github_reconcile_state').selectAll().where('id', '=', STATE_ID).executeTakeFirst();
  const carried = row?.carried_cursor && row.carried_until ? { cursor: row.carried_cursor, untilMs: row.carried_until.getTime() } : null;
  return { lastRunAt: row?.last_run_at.getTime(), carried };
}

async function saveState(db: Db, state: ListingState): Promise<void> {
  const values = {
    last_run_at: new Date(state.lastRunAt ?? 0),
    carried_cursor: state.carried?.cursor ?? null,
    carried_until: state.carried ? new Date(state.carried.untilMs) : null,
  };
  await db
    .insertInto('github_reconcile_state')
    .values({ id: STATE_ID, ...values })
    .onConflict((oc) => oc.column('id').doUpdateSet(values))
    .execute();
}

/** One run's calls to the App's routes: one at a time, each paid for before it is made; the first refusal of the budget or a limit stops them all. */
class AppCalls {
  stopped: { by: StoppedBy; untilMs?: number } | null = null;
  readonly budget: AppBudget;

  constructor(private readonly deps: ReconcileDeps) {
    this.budget = appBudget(deps.db, { appId: deps.appId, pointsPerMinute: deps.limits.pointsPerMinute, now: deps.now });
  }

  /** Makes the call if the run is not stopped and the budget pays for it; undefined when it was not made. */
  async call<T>(points: number, make: () => Promise<T>): Promise<{ value: T } | undefined> {
    if (this.stopped) return undefined;
    const paid = await this.budget.spend(points);
    if (!paid.ok) {
      this.stopped = { by: paid.why, untilMs: paid.untilMs };
      return undefined;
    }
    try {
      const value = await make();
      return { value };
    } catch (error) {
      if (!rateLimitedAnswer(error)) throw error;
      const failure = asGithubFailure(error);
      const untilMs = await this.budget.limited(failure);
      this.deps.onRateLimit?.(isPrimaryLimit(failure) ? 'primary' : 'secondary', Math.max(0, untilMs - this.deps.now()));
      this.stopped = { by: 'rate_limit', untilMs };
      return undefined;
    }
  }
}

/** Pages from `cursor` (null: the top) until one ends older than `untilMs`, at most `pages`; `next` is where the cap or a stop left it. */
async function walk(calls: AppCalls, api: GithubApi, from: { cursor: string | null; untilMs: number; pages: number }) {
  const found: HookDelivery[] = [];
  let next = from.cursor;
  for (let read = 0; read < from.pages; read++) {
    const page = await calls.call(CALL_POINTS.GET, () => api.deliveriesPage(next));
    if (!page) return { found, pages: read, next, stopped: true };
    const { deliveries, next: after } = page.value;
    found.push(...deliveries.filter((d) => Date.parse(d.deliveredAt) >= from.untilMs));
    const last = deliveries.at(-1);
    if (!after || !last || Date.parse(last.deliveredAt) < from.untilMs) return { found, pages: read + 1, next: null, stopped: false };
    next = after;
  }
  return { found, pages: from.pages, next, stopped: false };
}

/** A listing's cursor GitHub does not take: GET /app/hook/deliveries answers a bad one 400 or 422. */
const refusesCursor = (error: unknown) => (error as Error)?.name === 'HttpError' && [400, 422].includes(asGithubFailure(error).status ?? 0);

/**
 * This run's part of the delivery log, and the state to keep once it is handled. A walk stopped
 * by the budget or a limit keeps its cursor exactly as the page cap does: the next run goes on
 * from the page it did not read.
 */
async function listDeliveries(deps: ReconcileDeps, calls: AppCalls, startedAt: number) {
  let state = await loadState(deps.db);
  let plan = listingPlan(state, startedAt);
  const run: Parameters<typeof nextListingState>[2] = { startedAt };
  const seen: HookDelivery[] = [];
  let pages = deps.limits.maxPages;
  if (plan.carried) {
    try {
      const carried = await walk(calls, deps.api, { ...plan.carried, pages });
      seen.push(...carried.found);
      pages -= carried.pages;
      run.carried = { next: carried.next };
    } catch (error) {
      // A carried cursor GitHub no longer takes (its 400 or 422): the top walk reaches down to its bound instead.
      if (!refusesCursor(error)) throw error;
      state = dropCarried(state);
      plan = listingPlan(state, startedAt);
    }
  }
  if ((!plan.carried || run.carried?.next === null) && pages > 0 && !calls.stopped) {
    const top = await walk(calls, deps.api, { cursor: null, untilMs: plan.topUntilMs, pages });
    seen.push(...top.found);
    // A top walk stopped before its first page did not run: the window stays where it was.
    if (!(top.stopped && top.pages === 0)) run.top = { next: top.next };
  }
  const next = nextListingState(state, plan, run);
  return { seen, next, complete: run.top !== undefined && next.carried === null };
}

type Row = RedeliveryRecord & { guid: string; lastStatusCode: number; event: string };

/** The records of the GUIDs listed, and of every GUID owed an ask from an earlier run. */
async function loadRecords(db: Db, guids: string[]): Promise<Map<string, Row>> {
  const rows = await db
    .selectFrom('github_redeliveries')
    .selectAll()
    .where((eb) => eb.or([eb('outcome', 'in', ['ask_failed', 'waiting']), ...(guids.length > 0 ? [eb('guid', 'in', guids)] : [])]))
    .execute();
  return new Map(
    rows.map((r) => [
      r.guid,
      {
        guid: r.guid,
        event: r.event,
        lastAttemptId: Number(r.last_attempt_id),
        askedAttemptId: r.asked_attempt_id === null ? null : Number(r.asked_attempt_id),
        tries: r.tries,
        outcome: r.outcome,
        lastStatusCode: r.last_status_code,
      },
    ]),
  );
}

type LoggedAttempt = { guid: string; event: string; id: number; statusCode: number };
/** One run's dependencies and its calls to the App's routes. */
type ReconcilePass = { deps: ReconcileDeps; calls: AppCalls };

/** The GUID's record after a decision: its newest attempt, its outcome, and the asks it took. */
async function saveRecord(
  db: Db,
  attempt: LoggedAttempt,
  change: { outcome: RedeliveryOutcome; counted?: number; uncounted?: number; askedAttemptId?: number; error?: string | null },
): Promise<void> {
  const set = {
    last_attempt_id: attempt.id,
    last_status_code: attempt.statusCode,
    outcome: change.outcome,
    ...(change.error === undefined ? {} : { last_error: change.error }),
    updated_at: sql<Date>`now()`,
    ...(change.askedAttemptId === undefined ? {} : { asked_attempt_id: change.askedAttemptId }),
  };
  await db
    .insertInto('github_redeliveries')
    .values({ guid: attempt.guid, event: attempt.event, ...set, tries: change.counted ?? 0, uncounted_tries: change.uncounted ?? 0 })
    .onConflict((oc) =>
      oc.column('guid').doUpdateSet({
        ...set,
        last_attempt_id: sql`greatest(github_redeliveries.last_attempt_id, ${attempt.id})`,
        tries: sql`github_redeliveries.tries + ${change.counted ?? 0}`,
        uncounted_tries: sql`github_redeliveries.uncounted_tries + ${change.uncounted ?? 0}`,
      }),
    )
    .execute();
}

/**
 * GitHub's refusal of a redelivery for good: a 4xx that is not a rate limit, nor its 422
 * ("Validation failed, or the endpoint has been spammed"), which is asked again next run.
 */
const refusedForGood = (error: unknown) => {
  if ((error as Error)?.name !== 'HttpError') return false;
  const failure = asGithubFailure(error);
  return failure.status !== undefined && failure.status >= 400 && failure.status < 500 && failure.status !== 422;
};

/** What GitHub's answer to an ask makes of the GUID; an accepted ask counts toward the cap unless the attempt was our own shed answer, a failed one always. */
function askOutcome(error: unknown, counted: boolean) {
  if (error === undefined) return { outcome: 'asked' as const, counts: counted ? { counted: 1 } : { uncounted: 1 }, answer: 'accepted' };
  const outcome = refusedForGood(error) ? ('ask_refused' as const) : ('ask_failed' as const);
  return { outcome, counts: { counted: 1 }, answer: outcome === 'ask_refused' ? 'refused' : 'failed' };
}

/** Asks GitHub to redeliver one attempt, recording the try and its answer; undefined when the run stopped before the ask was made. */
async function ask(run: ReconcilePass, attempt: LoggedAttempt, decision: Extract<RedeliveryDecision, { action: 'ask' }>) {
  const { deps, calls } = run;
  let failure: unknown;
  const made = await calls.call(CALL_POINTS.POST, async () => {
    try {
      await deps.api.redeliver(decision.attemptId);
    } catch (error) {
      if (rateLimitedAnswer(error) || !isGithubCallError(error)) throw error;
      failure = error;
    }
  });
  if (!made) return undefined;
  const what = `POST /app/hook/deliveries/${decision.attemptId}/attempts`;
  const error = failure === undefined ? null : githubError(failure, what);
  const result = askOutcome(failure, decision.counted);
  await saveRecord(deps.db, attempt, { outcome: result.outcome, ...result.counts, askedAttemptId: decision.attemptId, error });
  const answer = error === null ? result.answer : `${result.answer}: ${error}`;
  await deps.db
    .insertInto('github_redelivery_tries')
    .values({ guid: attempt.guid, attempt_id: decision.attemptId, counted: 'counted' in result.counts, answer: answer.slice(0, 500) })
    .execute();
  const metric = { asked: decision.counted ? 'asked' : 'asked_uncounted', ask_refused: 'refused', ask_failed: 'failed' } as const;
  deps.onRedelivery?.(metric[result.outcome]);
  return { asked: result.outcome === 'asked', error };
}

/** Whether our answer to an attempt was a shed 503 (GitHub keeps it); undefined when the run stopped before it could ask. */
async function wasShed(deps: ReconcileDeps, calls: AppCalls, attempt: { id: number; statusCode: number }): Promise<boolean | undefined> {
  if (attempt.statusCode !== 503) return false;
  const read = await calls.call(CALL_POINTS.GET, async () => {
    try {
      const answer = await deps.api.deliveryAnswer(attempt.id);
      return isShedAnswer(answer.statusCode, answer.body);
    } catch (error) {
      if (rateLimitedAnswer(error)) throw error;
      // A detail GitHub will not give counts as a real failure.
      githubError(error, 'GET /app/hook/deliveries/{id}');
      return false;
    }
  });
  return read?.value;
}

interface Redelivered {
  asked: number;
  capped: number;
  error: string | null;
}

/** One GUID decided, asked for (when the run may still ask) and recorded; an ask it cannot make now is left `waiting`. */
async function redeliverOne(
  run: ReconcilePass,
  guid: { attempt: LoggedAttempt; record: Row | undefined; delivered: boolean },
  result: Redelivered & { asks: number },
) {
  const { deps, calls } = run;
  const { attempt, record } = guid;
  const decide = (shed: boolean) =>
    decideRedelivery(record, { newest: attempt, delivered: guid.delivered, shed }, deps.limits.maxRedeliveries);
  let decision = decide(false);
  // Whether our answer was a shed 503 matters only for an ask that would count, or a GUID at its cap.
  const counts = (decision.action === 'ask' && decision.counted) || (decision.action === 'record' && decision.outcome === 'capped');
  if (counts && attempt.statusCode === 503) {
    if (decision.action === 'ask' && result.asks >= deps.limits.redeliveriesPerRun) calls.stopped ??= { by: 'run_cap' };
    const shed = await wasShed(deps, calls, attempt);
    // Not known before the run stopped: decided by a later run.
    if (shed === undefined) return saveRecord(deps.db, attempt, { outcome: 'waiting' });
    if (shed) decision = decide(true);
  }
  if (decision.action === 'record') {
    await saveRecord(deps.db, attempt, { outcome: decision.outcome });
    if (decision.outcome === 'capped' && record?.outcome !== 'capped') {
      result.capped += 1;
      deps.onRedelivery?.('capped');
    }
    return;
  }
  if (decision.action !== 'ask') return;
  if (result.asks >= deps.limits.redeliveriesPerRun) calls.stopped ??= { by: 'run_cap' };
  const asked = await ask(run, attempt, decision);
  if (!asked) return saveRecord(deps.db, attempt, { outcome: 'waiting' });
  result.asks += 1;
  result.asked += asked.asked ? 1 : 0;
  result.error ??= asked.error;
}

/**
 * Every GUID of the listing, and every one owed an ask from an earlier run, oldest attempt first:
 * decided, asked for and recorded, at most `redeliveriesPerRun` asks, one at a time.
 */
async function redeliver(deps: ReconcileDeps, calls: AppCalls, seen: HookDelivery[]): Promise<Redelivered> {
  const groups = newestAttempts(seen);
  const records = await loadRecords(deps.db, [...groups.keys()]);
  const guids = [...new Set([...groups.keys(), ...records.keys()])].map((guid) => {
    const group = groups.get(guid);
    const record = records.get(guid);
    const newest = group?.newest ?? { id: record!.lastAttemptId, statusCode: record!.lastStatusCode };
    const attempt = { guid, event: group?.newest.event ?? record?.event ?? '', id: newest.id, statusCode: newest.statusCode };
    return { attempt, record, delivered: group?.delivered ?? false };
  });
  guids.sort((a, b) => a.attempt.id - b.attempt.id);
  const result = { asked: 0, capped: 0, asks: 0, error: null as string | null };
  for (const guid of guids) await redeliverOne({ deps, calls }, guid, result);
  return result;
}

export interface DeliveriesReconciled {
  deliveriesSeen: number;
  redeliveriesAsked: number;
  redeliveriesCapped?: number;
  listingComplete?: boolean;
  /** GUIDs owed an ask after this run (left by its cap, the budget or a limit, or not taken by GitHub). */
  redeliveriesWaiting?: number;
  /** Points this run spent on the App's routes. */
  pointsSpent?: number;
  /** Why the run stopped calling the App's routes before it was done, and when they may be called again. */
  stoppedBy?: StoppedBy | null;
  resumeAt?: string | null;
  error: string | null;
}

/** GUIDs owed an ask: the gauge of those waiting. */
async function owedAsks(db: Db): Promise<number> {
  const row = await db
    .selectFrom('github_redeliveries')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('outcome', 'in', ['waiting', 'ask_failed'])
    .executeTakeFirstOrThrow();
  return row.n;
}

/** The listing and the asks of one run, which holds the App's reconcile lock. */
async function listAndAsk(deps: ReconcileDeps, startedAt: number): Promise<DeliveriesReconciled> {
  const calls = new AppCalls(deps);
  let listing;
  try {
    listing = await listDeliveries(deps, calls, startedAt);
  } catch (error) {
    return {
      deliveriesSeen: 0,
      redeliveriesAsked: 0,
      pointsSpent: calls.budget.spent,
      error: githubError(error, 'GET /app/hook/deliveries'),
    };
  }
  const asked = await redeliver(deps, calls, listing.seen);
  await saveState(deps.db, listing.next);
  if (calls.stopped?.by !== 'rate_limit' && calls.budget.spent > 0) await calls.budget.answered();
  await deps.db
    .deleteFrom('github_redeliveries')
    .where('updated_at', '<', new Date(startedAt - DELIVERY_LOG_WINDOW_MS - 24 * 3600_000))
    .execute();
  return {
    deliveriesSeen: listing.seen.length,
    redeliveriesAsked: asked.asked,
    redeliveriesCapped: asked.capped,
    listingComplete: listing.complete,
    redeliveriesWaiting: await owedAsks(deps.db),
    pointsSpent: calls.budget.spent,
    stoppedBy: calls.stopped?.by ?? null,
    resumeAt: calls.stopped?.untilMs === undefined ? null : new Date(calls.stopped.untilMs).toISOString(),
    error: asked.error,
  };
}

/**
 * Reads this run's part of the delivery log and asks GitHub to redeliver what needs it, paced
 * (src/github/app-budget.ts): one call at a time, each paid for from the App's budget a minute,
 * at most `redeliveriesPerRun` asks, and none once GitHub rate-limits the App, until its wait is
 * over. The listing state moves on whatever GitHub answered the asks (the GUID records keep what
 * must be asked again), and GUID records past GitHub's three days are dropped. Another run
 * holding the App's lock leaves the log to it.
 */
export async function reconcileDeliveries(deps: ReconcileDeps): Promise<DeliveriesReconciled> {
  const startedAt = deps.now();
  const done = await withAppLock(deps.db, deps.appId, () => listAndAsk(deps, startedAt));
  if (done !== 'busy') return done;
  return { deliveriesSeen: 0, redeliveriesAsked: 0, pointsSpent: 0, stoppedBy: 'busy', resumeAt: null, error: null };
}
