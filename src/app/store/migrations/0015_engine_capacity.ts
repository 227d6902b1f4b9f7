import { type Kysely, sql } from 'kysely';

/**
 * Admission by measured capacity. `engine_delays` holds what each worker process measured of the
 * engine, per task queue, about once a second (src/app/engine-delay.ts): the backlog's age as
 * Temporal's DescribeTaskQueue reports it, and the lag from a report's receipt at the front door to
 * its application in the run. The API processes read the worst fresh row to admit new work by
 * delay (src/app/admission.ts). `automation_runs_live` makes the live-run count that the capacity
 * check reads (src/runs/capacity.ts) an index scan over running rows only.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('engine_delays')
    .addColumn('task_queue', 'text', (c) => c.notNull())
    .addColumn('worker_id', 'text', (c) => c.notNull())
    .addColumn('backlog_age_ms', 'integer', (c) => c.notNull())
    .addColumn('backlog_count', 'bigint', (c) => c.notNull())
    .addColumn('lag_ms', 'integer', (c) => c.notNull())
    .addColumn('lag_samples', 'integer', (c) => c.notNull())
    .addColumn('published_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('engine_delays_pk', ['task_queue', 'worker_id'])
    .execute();
  await sql`CREATE INDEX automation_runs_live ON automation_runs (created_at) WHERE status = 'running'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS automation_runs_live`.execute(db);
  await db.schema.dropTable('engine_delays').ifExists().execute();
}
