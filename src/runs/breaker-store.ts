/**
 * Each member's breaker (src/runs/breaker.ts) in Postgres (`runner_breakers`, one row per member
 * that ever had a runtime failure), so every process sees the same one. Every change is a
 * read-modify-write under the row's lock. A run's end reaches it from the run's own closing write
 * (activities/runs.ts), which may repeat: the rule ignores a failure it already counted.
 */
import type { Db } from '../app/store/db';
import { isClosedRunStatus, type RunSummary } from './contract';
import {
  breakerPhase,
  closedBreaker,
  recordRunEnd,
  runVerdict,
  startProbe,
  type BreakerMoment,
  type BreakerPhase,
  type BreakerState,
} from './breaker';

interface MemberKey {
  organizationId: string;
  memberId: string;
}

/** Whose breaker row changes, and when (its `updated_at`, ms). */
interface BreakerChange {
  key: MemberKey;
  now: number;
}

async function readState(db: Db, key: MemberKey, lock: boolean): Promise<BreakerState | undefined> {
  let query = db
    .selectFrom('runner_breakers')
    .select('state')
    .where('organization_id', '=', key.organizationId)
    .where('member_id', '=', key.memberId);
  if (lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  return row?.state as BreakerState | undefined;
}

async function writeState(db: Db, { key, now }: BreakerChange, state: BreakerState): Promise<void> {
  await db
    .updateTable('runner_breakers')
    .set({
      state: JSON.stringify(state),
      paused_until: state.pausedUntil === null ? null : new Date(state.pausedUntil),
      updated_at: new Date(now),
    })
    .where('organization_id', '=', key.organizationId)
    .where('member_id', '=', key.memberId)
    .execute();
}

/** The member's breaker changed by `change` under its row's lock (the row created first, closed, if it is new). */
async function changeBreaker<T>(
  db: Db,
  row: BreakerChange,
  change: (state: BreakerState) => { state: BreakerState; answer: T },
): Promise<T> {
  const { key, now } = row;
  await db
    .insertInto('runner_breakers')
    .values({
      organization_id: key.organizationId,
      member_id: key.memberId,
      state: JSON.stringify(closedBreaker()),
      updated_at: new Date(now),
    })
    .onConflict((oc) => oc.columns(['organization_id', 'member_id']).doNothing())
    .execute();
  return db.transaction().execute(async (trx) => {
    const state = (await readState(trx, key, true)) ?? closedBreaker();
    const next = change(state);
    if (next.state !== state) await writeState(trx, row, next.state);
    return next.answer;
  });
}

/**
 * Takes a closed run's end into its member's breaker. `tripped` when this opened it. A run that
 * says nothing of its runtime, or worked while the breaker is closed, costs one read and no write.
 */
export async function recordRunnerOutcome(db: Db, summary: RunSummary, moment: BreakerMoment): Promise<{ tripped: boolean }> {
  const { now } = moment;
  if (summary.memberId === undefined || !isClosedRunStatus(summary.status)) return { tripped: false };
  const key = { organizationId: summary.organizationId, memberId: summary.memberId };
  const end = { runId: summary.id, at: summary.endedAt ?? now, verdict: runVerdict(summary), error: summary.error };
  if (end.verdict !== 'runtime_failure') {
    const state = await readState(db, key, false);
    if (state === undefined || breakerPhase(state, now) === 'closed') return { tripped: false };
  }
  return changeBreaker(db, { key, now }, (state) => {
    const next = recordRunEnd(state, end, moment);
    return { state: next.state, answer: { tripped: next.tripped } };
  });
}

/** A member's breaker as another feature sees it: whether their requests may start runs, and why not. */
export interface MemberBreaker {
  phase: BreakerPhase;
  /** While open or half-open: when the pause ends (ms). */
  pausedUntil: number | null;
  lastError: string | null;
  /** Half-open: the run probing the runtime, if one started. */
  probeRunId: string | null;
}

export async function memberBreaker(db: Db, key: MemberKey, now: number): Promise<MemberBreaker> {
  const state = (await readState(db, key, false)) ?? closedBreaker();
  const phase = breakerPhase(state, now);
  return {
    phase,
    pausedUntil: phase === 'closed' ? null : state.pausedUntil,
    lastError: phase === 'closed' ? null : state.lastError,
    probeRunId: phase === 'half_open' ? (state.probe?.runId ?? null) : null,
  };
}

/**
 * Whether an invocation of the member may start run `runId` now (src/runs/breaker.ts
 * `startProbe`): yes while closed, no while open, and while half-open only as the probe, which
 * this records. Its run's end then decides.
 */
export async function startRunUnderBreaker(db: Db, key: MemberKey & { runId: string }, moment: BreakerMoment): Promise<boolean> {
  const { now } = moment;
  const state = await readState(db, key, false);
  if (state === undefined) return true;
  const phase = breakerPhase(state, now);
  if (phase !== 'half_open') return phase === 'closed';
  return changeBreaker(db, { key, now }, (current) => {
    const decided = startProbe(current, key.runId, moment);
    return { state: decided.state, answer: decided.allowed };
  });
}

/** The breakers of these members of the organization, for the runners list (absent: never tripped nor counting). */
export async function breakersOf(db: Db, organizationId: string, memberIds: string[]): Promise<Map<string, BreakerState>> {
  if (memberIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('runner_breakers')
    .select(['member_id', 'state'])
    .where('organization_id', '=', organizationId)
    .where('member_id', 'in', memberIds)
    .execute();
  return new Map(rows.map((row) => [row.member_id, row.state as BreakerState]));
}
