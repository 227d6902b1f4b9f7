import { type Kysely, sql } from 'kysely';

/**
 * The GitHub target sync. A sync event now runs (`running`) and ends `completed`, `partial`
 * (some manifest invalid), `failed` or `superseded` (a newer head was synced instead), with its
 * attempts, timings and error. A target keeps the head it last synced and the one waiting, and
 * `github_target_files` holds its snapshot: one row per kept path.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE github_sync_events DROP CONSTRAINT IF EXISTS github_sync_events_status_check`.execute(db);
  await sql`ALTER TABLE github_sync_events ADD CONSTRAINT github_sync_events_status_check
    CHECK (status IN ('queued', 'running', 'completed', 'partial', 'skipped', 'failed', 'superseded'))`.execute(db);
  await db.schema
    .alterTable('github_sync_events')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .addColumn('synced_sha', 'text')
    .addColumn('error_code', 'text')
    .addColumn('error_message', 'text')
    .execute();
  await sql`CREATE INDEX github_sync_events_target_open ON github_sync_events (target_id, created_at)
    WHERE status IN ('queued', 'running')`.execute(db);

  await db.schema
    .alterTable('github_connector_targets')
    .addColumn('synced_sha', 'text')
    .addColumn('synced_at', 'timestamptz')
    .addColumn('pending_sha', 'text')
    .addColumn('last_sync_status', 'text')
    .addColumn('last_sync_attempts', 'integer')
    .addColumn('last_sync_counts', 'jsonb')
    .addColumn('last_sync_error_code', 'text')
    .addColumn('last_sync_error_message', 'text')
    .addColumn('last_sync_at', 'timestamptz')
    .execute();

  await db.schema
    .createTable('github_target_files')
    .addColumn('target_id', 'text', (c) => c.notNull().references('github_connector_targets.id').onDelete('cascade'))
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('blob_sha', 'text', (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addColumn('content', 'text')
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status IN ('ok', 'invalid', 'skipped')`))
    .addColumn('error', 'text')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('github_target_files_pk', ['target_id', 'path'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('github_target_files').ifExists().execute();
  await sql`DROP INDEX IF EXISTS github_sync_events_target_open`.execute(db);
  for (const column of ['attempts', 'started_at', 'finished_at', 'synced_sha', 'error_code', 'error_message']) {
    await db.schema.alterTable('github_sync_events').dropColumn(column).execute();
  }
  for (const column of [
    'synced_sha',
    'synced_at',
    'pending_sha',
    'last_sync_status',
    'last_sync_attempts',
    'last_sync_counts',
    'last_sync_error_code',
    'last_sync_error_message',
    'last_sync_at',
  ]) {
    await db.schema.alterTable('github_connector_targets').dropColumn(column).execute();
  }
}
