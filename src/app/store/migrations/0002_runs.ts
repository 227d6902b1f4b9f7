import { type ColumnType, type Kysely, sql } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
/** pg returns int8 as a string (it may exceed 2^53); our values never do, the store converts. */
type BigInt8 = ColumnType<string, number | string, number | string>;

/**
 * `automation_runs` is a projection of each run workflow, kept current by the workflow itself
 * (activities/runs.ts) at every status transition and with every batch of persisted events. It
 * backs the list route and the "closed" check of the report routes. Why a table rather than
 * Temporal visibility: visibility is eventually consistent and the dev server's SQLite
 * visibility is slow under load, while a runtime polling `?status=queued` must see a run the
 * moment it exists; the row also outlives the namespace retention, so a closed run stays
 * closed after Temporal has forgotten it.
 *
 * `automation_run_events` is the run's event log, in apply order. The primary key is the
 * dedupe key; the activity inserts with ON CONFLICT DO NOTHING, so activity retries are harmless.
 */
export interface RunTables {
  automation_runs: {
    organization_id: string;
    run_id: string;
    status: string;
    attempt: number;
    member_id: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
    ended_at: NullableTimestamp;
    /** Monotonic per run: a write with an older version (a zombie activity attempt) is ignored. */
    version: BigInt8;
    /** The RunSummary (messages.ts) as of `version`. `json`, not `jsonb`: it keeps any string, `\u0000` included. */
    summary: ColumnType<unknown, string, string>;
  };
  automation_run_events: {
    organization_id: string;
    run_id: string;
    attempt: BigInt8;
    sequence: BigInt8;
    type: string;
    payload: ColumnType<unknown, string, string>;
    /** The client's createdAt (ms). */
    created_at_ms: BigInt8;
    /** When the front door received the report (ms). */
    received_at_ms: BigInt8;
    persisted_at: Timestamp;
  };
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('automation_runs')
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('member_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('ended_at', 'timestamptz')
    .addColumn('version', 'bigint', (c) => c.notNull())
    .addColumn('summary', 'json', (c) => c.notNull())
    .addPrimaryKeyConstraint('automation_runs_pkey', ['organization_id', 'run_id'])
    .execute();
  // The list route: newest first, optionally by status.
  await sql`CREATE INDEX automation_runs_org_created ON automation_runs (organization_id, created_at DESC, run_id DESC)`.execute(db);
  await sql`CREATE INDEX automation_runs_org_status_created ON automation_runs (organization_id, status, created_at DESC, run_id DESC)`.execute(
    db,
  );

  // Written in the same transaction as the run's row, by the same activity.
  await db.schema
    .createTable('automation_run_events')
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('attempt', 'bigint', (c) => c.notNull())
    .addColumn('sequence', 'bigint', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('payload', 'json', (c) => c.notNull())
    .addColumn('created_at_ms', 'bigint', (c) => c.notNull())
    .addColumn('received_at_ms', 'bigint', (c) => c.notNull())
    .addColumn('persisted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('automation_run_events_pkey', ['organization_id', 'run_id', 'attempt', 'sequence'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('automation_run_events').ifExists().execute();
  await db.schema.dropTable('automation_runs').ifExists().execute();
}
