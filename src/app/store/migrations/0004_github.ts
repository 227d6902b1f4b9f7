import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('github_connector_targets')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('installation_id', 'bigint', (c) => c.notNull())
    .addColumn('repository_id', 'bigint')
    .addColumn('repository_full_name', 'text', (c) => c.notNull())
    .addColumn('ref', 'text')
    .addColumn('status', 'text', (c) =>
      c
        .notNull()
        .defaultTo('active')
        .check(sql`status IN ('active', 'disabled', 'disconnected')`),
    )
    .addColumn('status_reason', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  // The delivery workflow's lookups: by installation, then repository id or name.
  await sql`CREATE INDEX github_targets_installation ON github_connector_targets (installation_id, repository_id)`.execute(db);
  await sql`CREATE INDEX github_targets_repository_id ON github_connector_targets (repository_id)`.execute(db);
  await sql`CREATE INDEX github_targets_full_name ON github_connector_targets (lower(repository_full_name))`.execute(db);
  await sql`CREATE INDEX github_targets_organization ON github_connector_targets (organization_id, created_at)`.execute(db);

  await db.schema
    .createTable('github_sync_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('organization_id', 'text', (c) => c.references('organizations.id').onDelete('cascade'))
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('action', 'text')
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind IN ('push', 'full_resync')`))
    .addColumn('target_id', 'text', (c) => c.references('github_connector_targets.id').onDelete('set null'))
    .addColumn('installation_id', 'bigint', (c) => c.notNull())
    .addColumn('repository_id', 'bigint')
    .addColumn('repository_full_name', 'text')
    .addColumn('ref', 'text')
    .addColumn('head_sha', 'text')
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status IN ('queued', 'running', 'completed', 'skipped', 'failed')`))
    .addColumn('outcome', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  // A repeated push to one head is recorded once per target.
  await sql`CREATE UNIQUE INDEX github_sync_events_push_head ON github_sync_events (target_id, head_sha)
    WHERE kind = 'push' AND target_id IS NOT NULL`.execute(db);
  // One event per (delivery, target): a retried activity, or a redelivery after the workflow id
  // left Temporal's retention, records nothing twice.
  await sql`CREATE UNIQUE INDEX github_sync_events_delivery_target ON github_sync_events (delivery_id, (coalesce(target_id, '')))`.execute(
    db,
  );
  await sql`CREATE INDEX github_sync_events_listing ON github_sync_events (organization_id, created_at DESC, id DESC)`.execute(db);

  await db.schema
    .createTable('github_installation_repositories')
    .addColumn('installation_id', 'bigint', (c) => c.notNull())
    .addColumn('repository_id', 'bigint', (c) => c.notNull())
    .addColumn('repository_full_name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status IN ('available', 'removed')`))
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('github_installation_repositories_pk', ['installation_id', 'repository_id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['github_installation_repositories', 'github_sync_events', 'github_connector_targets']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
