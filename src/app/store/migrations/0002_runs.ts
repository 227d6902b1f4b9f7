import { type Kysely, sql } from 'kysely';

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
