/**
 * The reconcile, so that nothing is lost while the service was down or refusing: GitHub's log of
 * the App's deliveries is read (each window overlapping the last, a listing cut short by its page
 * cap going on from its cursor next time) and each lost delivery asked for again, a bounded
 * number of times per GUID; and every active target's branch head is compared with what it has
 * synced, its known states (branch gone, repository empty, access lost) recorded as it goes.
 * GitHub's refusals come back as the result's `error` (the next run tries again); Postgres
 * failures throw, for the activity to retry.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';
import { asGithubFailure, isGithubCallError, type GithubApi, type HookDelivery } from './api';
import { isRateLimited, classifyGithubFailure, type RateLimitKind } from './api-errors';
import { followedBranch, KnownStateError, readBranchHead } from './branch-heads';
import type { GithubTargetState } from './contract';
import { installationWait, recordRateLimit } from './installations';
import {
  DELIVERY_LOG_WINDOW_MS,
  decideRedelivery,
  dropCarried,
  headDrifted,
  isShedAnswer,
  listingPlan,
  newestAttempts,
  nextListingState,
  type ListingState,
  type RedeliveryDecision,
  type RedeliveryOutcome,
  type RedeliveryRecord,
} from './reconcile-rules';
import { recordTargetState } from './sync-store';
import { getTarget, recordResync, type GithubTarget } from './target-records';

const STATE_ID = 'deliveries';

/** What became of one redelivery the reconcile decided (the worker's metric). */
export type RedeliveryMetric = 'asked' | 'asked_uncounted' | 'capped' | 'refused';

export interface ReconcileDeps {
  db: Db;
  api: GithubApi;
  now: () => number;
  /** Pages of the delivery log one run reads at most, and asks per GUID that count. */
  limits: { maxPages: number; maxRedeliveries: number };
  /** Hands a recorded resync event to the target's workflow. */
  resync: (target: GithubTarget, eventId: string) => Promise<void>;
  onRedelivery?: (outcome: RedeliveryMetric) => void;
  onRateLimit?: (limit: RateLimitKind, waitMs: number) => void;
}

/** GitHub's answer in a line (status and message); anything that is not GitHub's is rethrown. */
function githubError(error: unknown, what: string): string {
  if (!isGithubCallError(error)) throw error;
  const failure = asGithubFailure(error);
  return `${what}: ${failure.status ?? 'network'} ${failure.message}`.slice(0, 500);
}

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

/** Pages from `cursor` (null: the top) until one ends older than `untilMs`, at most `budget`; `next` is where the cap stopped it. */
async function walk(api: GithubApi, cursor: string | null, untilMs: number, budget: number) {
  const found: HookDelivery[] = [];
  let next = cursor;
  for (let pages = 0; pages < budget; pages++) {
    const page = await api.deliveriesPage(next);
    found.push(...page.deliveries.filter((d) => Date.parse(d.deliveredAt) >= untilMs));
    const last = page.deliveries.at(-1);
    if (!page.next || !last || Date.parse(last.deliveredAt) < untilMs) return { found, pages: pages + 1, next: null };
    next = page.next;
  }
  return { found, pages: budget, next };
}

/** A listing's cursor GitHub does not take: GET /app/hook/deliveries answers a bad one 400 or 422. */
const refusesCursor = (error: unknown) => (error as Error)?.name === 'HttpError' && [400, 422].includes(asGithubFailure(error).status ?? 0);

/** GitHub's refusal for good: a 4xx that is not a rate limit (a delivery it will not redeliver, for one). */
const refusedForGood = (error: unknown) => {
  if ((error as Error)?.name !== 'HttpError') return false;
  const failure = asGithubFailure(error);
  return failure.status !== undefined && failure.status >= 400 && failure.status < 500 && !isRateLimited(failure);
};

/** This run's part of the delivery log, and the state to keep once it is handled. */
async function listDeliveries(deps: ReconcileDeps, startedAt: number) {
  let state = await loadState(deps.db);
  let plan = listingPlan(state, startedAt);
  const run: Parameters<typeof nextListingState>[2] = { startedAt };
  const seen: HookDelivery[] = [];
  let budget = deps.limits.maxPages;
  if (plan.carried) {
    try {
      const carried = await walk(deps.api, plan.carried.cursor, plan.carried.untilMs, budget);
      seen.push(...carried.found);
      budget -= carried.pages;
      run.carried = { next: carried.next };
    } catch (error) {
      // A carried cursor GitHub no longer takes (its 400 or 422): the top walk reaches down to its bound instead.
      if (!refusesCursor(error)) throw error;
      state = dropCarried(state);
      plan = listingPlan(state, startedAt);
    }
  }
  if ((!plan.carried || run.carried?.next === null) && budget > 0) {
    const top = await walk(deps.api, null, plan.topUntilMs, budget);
    seen.push(...top.found);
    run.top = { next: top.next };
  }
  const next = nextListingState(state, plan, run);
  return { seen, next, complete: run.top !== undefined && next.carried === null };
}

type Row = RedeliveryRecord & { guid: string; lastStatusCode: number };

async function loadRecords(db: Db, guids: string[]): Promise<Map<string, Row>> {
  const rows = await db
    .selectFrom('github_redeliveries')
    .selectAll()
    .where((eb) => eb.or([eb('outcome', '=', 'ask_failed'), ...(guids.length > 0 ? [eb('guid', 'in', guids)] : [])]))
    .execute();
  return new Map(
    rows.map((r) => [
      r.guid,
      {
        guid: r.guid,
        lastAttemptId: Number(r.last_attempt_id),
        askedAttemptId: r.asked_attempt_id === null ? null : Number(r.asked_attempt_id),
        tries: r.tries,
        outcome: r.outcome,
        lastStatusCode: r.last_status_code,
      },
    ]),
  );
}

/** The GUID's record after a decision: its newest attempt, its outcome, and the asks it took. */
async function saveRecord(
  db: Db,
  attempt: { guid: string; event: string; id: number; statusCode: number },
  change: { outcome: RedeliveryOutcome; counted?: number; uncounted?: number; askedAttemptId?: number; error?: string | null },
): Promise<void> {
  const set = {
    last_attempt_id: attempt.id,
    last_status_code: attempt.statusCode,
    outcome: change.outcome,
    last_error: change.error ?? null,
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

/** Asks GitHub to redeliver one attempt, recording the try and its answer; GitHub's refusal for good ends the GUID `ask_refused`. */
async function ask(
  deps: ReconcileDeps,
  attempt: { guid: string; event: string; id: number; statusCode: number },
  decision: Extract<RedeliveryDecision, { action: 'ask' }>,
) {
  const counts = decision.again ? {} : decision.counted ? { counted: 1 } : { uncounted: 1 };
  let answer = 'accepted';
  let outcome: RedeliveryOutcome = 'asked';
  let error: string | null = null;
  try {
    await deps.api.redeliver(decision.attemptId);
  } catch (failure) {
    error = githubError(failure, `POST /app/hook/deliveries/${decision.attemptId}/attempts`);
    outcome = refusedForGood(failure) ? 'ask_refused' : 'ask_failed';
    answer = `${outcome === 'ask_refused' ? 'refused' : 'failed'}: ${error}`;
  }
  await saveRecord(deps.db, attempt, { outcome, ...counts, askedAttemptId: decision.attemptId, error });
  await deps.db
    .insertInto('github_redelivery_tries')
    .values({ guid: attempt.guid, attempt_id: decision.attemptId, counted: decision.counted, answer: answer.slice(0, 500) })
    .execute();
  if (outcome === 'asked') deps.onRedelivery?.(decision.counted ? 'asked' : 'asked_uncounted');
  if (outcome === 'ask_refused') deps.onRedelivery?.('refused');
  return { asked: outcome === 'asked', error };
}

/** Whether our answer to an attempt was a shed 503 (GitHub keeps it); a detail GitHub will not give counts as a real failure. */
async function wasShed(api: GithubApi, attempt: HookDelivery): Promise<boolean> {
  if (attempt.statusCode !== 503) return false;
  try {
    const answer = await api.deliveryAnswer(attempt.id);
    return isShedAnswer(answer.statusCode, answer.body);
  } catch (error) {
    githubError(error, 'GET /app/hook/deliveries/{id}');
    return false;
  }
}

/** Every GUID of the listing (and every ask that failed before) decided, asked for and recorded. */
async function redeliver(deps: ReconcileDeps, seen: HookDelivery[]) {
  const groups = newestAttempts(seen);
  const records = await loadRecords(deps.db, [...groups.keys()]);
  const result = { asked: 0, capped: 0, error: null as string | null };
  for (const guid of new Set([...groups.keys(), ...records.keys()])) {
    const group = groups.get(guid);
    const record = records.get(guid);
    const newest = group?.newest ?? { id: record!.lastAttemptId, statusCode: record!.lastStatusCode };
    const seen = { newest, delivered: group?.delivered ?? false, shed: false };
    let decision = decideRedelivery(record, seen, deps.limits.maxRedeliveries);
    // Whether our answer was a shed 503 matters only for an ask that would count, or a GUID at its cap.
    const counts = (decision.action === 'ask' && decision.counted) || (decision.action === 'record' && decision.outcome === 'capped');
    if (counts && group && (await wasShed(deps.api, group.newest))) {
      decision = decideRedelivery(record, { ...seen, shed: true }, deps.limits.maxRedeliveries);
    }
    const attempt = { guid, event: group?.newest.event ?? '', id: newest.id, statusCode: newest.statusCode };
    if (decision.action === 'record') {
      await saveRecord(deps.db, attempt, { outcome: decision.outcome });
      if (decision.outcome === 'capped' && record?.outcome !== 'capped') {
        result.capped += 1;
        deps.onRedelivery?.('capped');
      }
    } else if (decision.action === 'ask') {
      const asked = await ask(deps, attempt, decision);
      result.asked += asked.asked ? 1 : 0;
      result.error ??= asked.error;
    }
  }
  return result;
}

export interface DeliveriesReconciled {
  deliveriesSeen: number;
  redeliveriesAsked: number;
  redeliveriesCapped?: number;
  listingComplete?: boolean;
  error: string | null;
}

/**
 * Reads this run's part of the delivery log and asks GitHub to redeliver what needs it; the
 * listing state moves on whatever GitHub answered the asks (the GUID records keep what must be
 * asked again), and GUID records past GitHub's three days are dropped.
 */
export async function reconcileDeliveries(deps: ReconcileDeps): Promise<DeliveriesReconciled> {
  const startedAt = deps.now();
  let listing;
  try {
    listing = await listDeliveries(deps, startedAt);
  } catch (error) {
    return { deliveriesSeen: 0, redeliveriesAsked: 0, error: githubError(error, 'GET /app/hook/deliveries') };
  }
  const asked = await redeliver(deps, listing.seen);
  await saveState(deps.db, listing.next);
  await deps.db
    .deleteFrom('github_redeliveries')
    .where('updated_at', '<', new Date(startedAt - DELIVERY_LOG_WINDOW_MS - 24 * 3600_000))
    .execute();
  return {
    deliveriesSeen: listing.seen.length,
    redeliveriesAsked: asked.asked,
    redeliveriesCapped: asked.capped,
    listingComplete: listing.complete,
    error: asked.error,
  };
}

export interface TargetsReconciled {
  targetsChecked: number;
  targetsResynced: number;
  targetStates?: GithubTargetState[];
  error: string | null;
}

/** Active targets whose organization owns their installation, with what they synced and what waits. */
function activeTargets(db: Db) {
  return db
    .selectFrom('github_connector_targets as t')
    .select(['t.id', 't.synced_sha', 't.pending_sha'])
    .where('t.status', '=', 'active')
    .where(
      sql<boolean>`EXISTS (SELECT 1 FROM github_installations i
      WHERE i.installation_id = t.installation_id AND i.organization_id = t.organization_id)`,
    )
    .orderBy('t.id')
    .execute();
}

/** A rate limit met reading a head: the installation waits (its other targets too), and is checked again next run. */
async function rateLimitedHead(deps: ReconcileDeps, target: GithubTarget, error: unknown): Promise<boolean> {
  if (!isGithubCallError(error) || !isRateLimited(asGithubFailure(error))) return false;
  const { strikes } = await installationWait(deps.db, target.installationId);
  const verdict = classifyGithubFailure(asGithubFailure(error), {
    attempt: 1,
    baseDelayMs: 0,
    nowMs: deps.now(),
    random: Math.random,
    rateLimitStrikes: strikes,
  });
  if (verdict.kind !== 'rate_limited') return false;
  const untilMs = await recordRateLimit(deps.db, target.installationId, verdict);
  deps.onRateLimit?.(verdict.limit, Math.max(0, untilMs - deps.now()));
  return true;
}

/** One target: its branch head against what it synced; a known state recorded (and reported), or cleared when the head is synced. */
async function reconcileTarget(
  deps: ReconcileDeps,
  row: { synced_sha: string | null; pending_sha: string | null },
  target: GithubTarget,
  result: TargetsReconciled,
) {
  if (target.ref !== null && !target.ref.startsWith('refs/heads/')) return;
  if ((await installationWait(deps.db, target.installationId)).untilMs > deps.now()) return;
  try {
    const { branch, head } = await readBranchHead(deps.api, deps.db, target, await followedBranch(deps.api, deps.db, target));
    result.targetsChecked += 1;
    if (!headDrifted(head, { syncedSha: row.synced_sha, pendingSha: row.pending_sha })) {
      if (head === row.synced_sha) await recordTargetState(deps.db, target.targetId, null);
      return;
    }
    await deps.resync(target, await recordResync(deps.db, target, 'reconcile', branch));
    result.targetsResynced += 1;
  } catch (error) {
    if (error instanceof KnownStateError) {
      result.targetsChecked += 1;
      await recordTargetState(deps.db, target.targetId, error.state);
      result.targetStates!.push({ targetId: target.targetId, repository: target.repository, state: error.state });
      return;
    }
    if (await rateLimitedHead(deps, target, error)) return;
    result.error ??= githubError(error, target.repository);
  }
}

/**
 * Resyncs every active target whose branch head is neither synced nor waiting (a push we never
 * got). A branch gone, an empty repository or lost access is the target's known state, reported
 * per target and not an error; a target whose installation GitHub rate-limits is left for the
 * next run.
 */
export async function reconcileTargets(deps: ReconcileDeps): Promise<TargetsReconciled> {
  const result: TargetsReconciled = { targetsChecked: 0, targetsResynced: 0, targetStates: [], error: null };
  for (const row of await activeTargets(deps.db)) {
    const target = await getTarget(deps.db, row.id);
    if (target) await reconcileTarget(deps, row, target, result);
  }
  return result;
}
