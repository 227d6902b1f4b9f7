import { type Kysely, sql } from 'kysely';

/**
 * GitHub as it behaves, second round.
 *
 * `github_target_files.type` says what the path is in the repository's tree: a `file`, a
 * `symlink` (followed within the repository, or skipped) or a `submodule` (listed with its commit,
 * never fetched); `link_target` is the path a link led to (or, for a link that was not followed,
 * the path it names).
 *
 * `github_redeliveries.outcome` may be `waiting`: a redelivery decided but not asked yet (the
 * run's cap, the App's budget or a rate limit stopped the run first), asked by a later run.
 *
 * `github_app_points` is every call the reconcile made with the App's JWT, with its points (a GET
 * 1, a POST 5), so that every worker of every replica spends from one budget a minute; and
 * `github_app_limits` is until when GitHub rate-limits the App's own routes (a wait every worker
 * keeps), with the limits without a stated time met in a row.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('github_target_files')
    .addColumn('type', 'text', (c) =>
      c
        .notNull()
        .defaultTo('file')
        .check(sql`type IN ('file', 'symlink', 'submodule')`),
    )
    .addColumn('link_target', 'text')
    .execute();

  await sql`ALTER TABLE github_redeliveries DROP CONSTRAINT IF EXISTS github_redeliveries_outcome_check`.execute(db);
  await sql`ALTER TABLE github_redeliveries ADD CONSTRAINT github_redeliveries_outcome_check
    CHECK (outcome IN ('asked', 'delivered', 'capped', 'rejected', 'ask_refused', 'ask_failed', 'waiting'))`.execute(db);

  await db.schema
    .createTable('github_app_points')
    .addColumn('app_id', 'text', (c) => c.notNull())
    .addColumn('spent_at', 'timestamptz', (c) => c.notNull())
    .addColumn('points', 'integer', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('github_app_points_window').on('github_app_points').columns(['app_id', 'spent_at']).execute();
  await db.schema
    .createTable('github_app_limits')
    .addColumn('app_id', 'text', (c) => c.primaryKey())
    .addColumn('limited_until', 'timestamptz', (c) => c.notNull())
    .addColumn('strikes', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('github_app_limits').ifExists().execute();
  await db.schema.dropTable('github_app_points').ifExists().execute();
  await sql`DELETE FROM github_redeliveries WHERE outcome = 'waiting'`.execute(db);
  await sql`ALTER TABLE github_redeliveries DROP CONSTRAINT IF EXISTS github_redeliveries_outcome_check`.execute(db);
  await sql`ALTER TABLE github_redeliveries ADD CONSTRAINT github_redeliveries_outcome_check
    CHECK (outcome IN ('asked', 'delivered', 'capped', 'rejected', 'ask_refused', 'ask_failed'))`.execute(db);
  await db.schema.alterTable('github_target_files').dropColumn('type').dropColumn('link_target').execute();
}
