/**
 * Postgres access for automation runs: the run projection (`automation_runs`) and the event log
 * (`automation_run_events`). See src/app/store/migrations/0002_runs.ts for why the table exists.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';
import type { RunEventReport, RunEventType, RunStatus, RunSummary } from './contract';

export interface PersistRunInput {
  organizationId: string;
  runId: string;
  /** Monotonic per run; an older version never overwrites a newer row. */
  version: number;
  summary: RunSummary;
  /** Applied events, in order. Already-persisted ones are skipped (idempotent). */
  events: RunEventReport[];
}

/** One transaction: the events, then the run's row. Safe to repeat (activity retries). */
export async function persistRun(db: Db, input: PersistRunInput): Promise<{ inserted: number }> {
  const { organizationId, runId, summary } = input;
  return db.transaction().execute(async (trx) => {
    let inserted = 0;
    if (input.events.length > 0) {
      const result = await trx
        .insertInto('automation_run_events')
        .values(
          input.events.map((event) => ({
            organization_id: organizationId,
            run_id: runId,
            attempt: event.attempt,
            sequence: event.sequence,
            type: event.type,
            payload: JSON.stringify(event.payload),
            created_at_ms: event.createdAt,
            received_at_ms: event.receivedAt,
          })),
        )
        .onConflict((oc) => oc.columns(['organization_id', 'run_id', 'attempt', 'sequence']).doNothing())
        .executeTakeFirst();
      inserted = Number(result.numInsertedOrUpdatedRows ?? 0);
    }
    const row = {
      organization_id: organizationId,
      run_id: runId,
      status: summary.status,
      attempt: summary.attempt,
      member_id: summary.memberId ?? null,
      created_at: new Date(summary.createdAt),
      updated_at: new Date(),
      ended_at: summary.endedAt === null ? null : new Date(summary.endedAt),
      version: input.version,
      summary: JSON.stringify(summary),
    };
    await trx
      .insertInto('automation_runs')
      .values(row)
      .onConflict((oc) =>
        oc
          .columns(['organization_id', 'run_id'])
          .doUpdateSet({
            status: (eb) => eb.ref('excluded.status'),
            attempt: (eb) => eb.ref('excluded.attempt'),
            member_id: (eb) => eb.ref('excluded.member_id'),
            updated_at: (eb) => eb.ref('excluded.updated_at'),
            ended_at: (eb) => eb.ref('excluded.ended_at'),
            version: (eb) => eb.ref('excluded.version'),
            summary: (eb) => eb.ref('excluded.summary'),
          })
          .where('automation_runs.version', '<', (eb) => eb.ref('excluded.version')),
      )
      .execute();
    return { inserted };
  });
}

export interface RunRow {
  status: RunStatus;
  attempt: number;
  memberId: string | null;
  /** When the run's workflow last wrote the row (every persisted batch and transition). */
  updatedAt: Date;
  summary: RunSummary;
}

export async function findRun(db: Db, organizationId: string, runId: string): Promise<RunRow | undefined> {
  const row = await db
    .selectFrom('automation_runs')
    .select(['status', 'attempt', 'member_id', 'updated_at', 'summary'])
    .where('organization_id', '=', organizationId)
    .where('run_id', '=', runId)
    .executeTakeFirst();
  return row
    ? {
        status: row.status as RunStatus,
        attempt: row.attempt,
        memberId: row.member_id,
        updatedAt: row.updated_at,
        summary: row.summary as RunSummary,
      }
    : undefined;
}

/**
 * Takes a short hold on the oldest claimable run visible to the caller (`memberId` set: only that
 * member's runs) and returns its id. Concurrent pollers skip each other's locked rows and holds,
 * so they try different runs; the claim Update on the run's workflow still decides.
 */
export async function holdClaimCandidate(
  db: Db,
  options: { organizationId: string; memberId?: string; now: Date; holdMs: number },
): Promise<string | undefined> {
  const { organizationId, memberId, now } = options;
  const until = new Date(now.getTime() + options.holdMs);
  const result = await sql<{ run_id: string }>`
    UPDATE automation_runs SET claim_pending_until = ${until}
    WHERE (organization_id, run_id) = (
      SELECT organization_id, run_id FROM automation_runs
      WHERE organization_id = ${organizationId}
        AND status IN ('queued', 'awaiting_retry')
        AND (summary->>'claimRequired') = 'true'
        AND (${memberId ?? null}::text IS NULL OR member_id = ${memberId ?? null})
        AND (claim_pending_until IS NULL OR claim_pending_until < ${now})
      ORDER BY created_at, run_id
      FOR UPDATE SKIP LOCKED
      LIMIT 1)
    RETURNING run_id`.execute(db);
  return result.rows[0]?.run_id;
}

/** Gives a hold back when the claim could not be decided (Temporal unavailable), so others may try. */
export async function releaseClaimHold(db: Db, organizationId: string, runId: string): Promise<void> {
  await db
    .updateTable('automation_runs')
    .set({ claim_pending_until: null })
    .where('organization_id', '=', organizationId)
    .where('run_id', '=', runId)
    .execute();
}

/** The caller's organization's runs, newest first. */
export async function listRuns(
  db: Db,
  options: { organizationId: string; status?: RunStatus; limit: number; memberId?: string },
): Promise<RunSummary[]> {
  let query = db
    .selectFrom('automation_runs')
    .select(['summary'])
    .where('organization_id', '=', options.organizationId)
    .orderBy('created_at', 'desc')
    .orderBy('run_id', 'desc')
    .limit(options.limit);
  if (options.status) query = query.where('status', '=', options.status);
  if (options.memberId !== undefined) query = query.where('member_id', '=', options.memberId);
  const rows = await query.execute();
  return rows.map((row) => row.summary as RunSummary);
}

/** A persisted event reads back exactly as it was reported. */
export type StoredRunEvent = RunEventReport;

/** Events in apply order: attempt, then sequence. `after` is a sequence (exclusive). */
export async function listRunEvents(
  db: Db,
  options: { organizationId: string; runId: string; attempt?: number; after?: number; limit: number },
): Promise<StoredRunEvent[]> {
  let query = db
    .selectFrom('automation_run_events')
    .select(['attempt', 'sequence', 'type', 'payload', 'created_at_ms', 'received_at_ms'])
    .where('organization_id', '=', options.organizationId)
    .where('run_id', '=', options.runId)
    .orderBy('attempt', 'asc')
    .orderBy('sequence', 'asc')
    .limit(options.limit);
  if (options.attempt !== undefined) query = query.where('attempt', '=', String(options.attempt));
  if (options.after !== undefined) query = query.where('sequence', '>', String(options.after));
  const rows = await query.execute();
  return rows.map((row) => ({
    attempt: Number(row.attempt),
    sequence: Number(row.sequence),
    type: row.type as RunEventType,
    payload: row.payload as Record<string, unknown>,
    createdAt: Number(row.created_at_ms),
    receivedAt: Number(row.received_at_ms),
  }));
}

/** Whether any event of the run is stored (a run the table does not know yet may have some). */
export async function hasRunEvents(db: Db, organizationId: string, runId: string): Promise<boolean> {
  const row = await db
    .selectFrom('automation_run_events')
    .select(sql<number>`1`.as('one'))
    .where('organization_id', '=', organizationId)
    .where('run_id', '=', runId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** A run, by its organization and id (its row's key). */
export interface RunKey {
  organizationId: string;
  runId: string;
}

/** How a row is closed from outside: the run's status and error, and when (now unless given). */
interface RowClosing {
  status: RunStatus;
  error: string;
  now?: Date;
}

/**
 * Closes a run's row for a workflow that ended outside its own logic (src/runs/reconcile.ts).
 * Only an open row changes, so a close written by the workflow itself is never overwritten; the
 * version moves past any write of that workflow still in flight.
 */
export async function closeRowOutsideLogic(db: Db, { organizationId, runId }: RunKey, outcome: RowClosing): Promise<boolean> {
  const { now = new Date() } = outcome;
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('automation_runs')
      .select(['status', 'summary'])
      .where('organization_id', '=', organizationId)
      .where('run_id', '=', runId)
      .forUpdate()
      .executeTakeFirst();
    if (!row || !OPEN_STATUSES.includes(row.status)) return false;
    // The summary is `json` (it keeps any string the runtime sent): edited here, not as jsonb.
    const summary = {
      ...(row.summary as RunSummary),
      status: outcome.status,
      error: outcome.error,
      endedAt: now.getTime(),
      leaseExpiresAt: null,
    };
    await trx
      .updateTable('automation_runs')
      .set({ status: outcome.status, ended_at: now, updated_at: now, version: sql`version + 1`, summary: JSON.stringify(summary) })
      .where('organization_id', '=', organizationId)
      .where('run_id', '=', runId)
      .execute();
    return true;
  });
}

const OPEN_STATUSES: readonly string[] = ['queued', 'running', 'awaiting_retry'];
