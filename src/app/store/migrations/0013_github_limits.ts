import { type Kysely, sql } from 'kysely';

/**
 * GitHub as it really behaves.
 *
 * `github_installations.rate_limited_until` is when GitHub lets the installation call again
 * after a rate limit (every target of the installation waits for it: one installation, one
 * budget), and `rate_limit_strikes` how many limits without a stated time came in a row (each
 * doubles the next wait).
 *
 * `github_connector_targets.default_branch` is the repository's default branch, which a target
 * without a ref follows, as a push or the repository API last named it.
 *
 * `github_reconcile_state.carried_cursor` and `carried_until`: a delivery listing the page cap
 * cut short goes on from that cursor at the next reconcile, down to that bound.
 *
 * `github_redeliveries` is each GUID the reconcile asked GitHub to redeliver (its asks, and how
 * it stands), and `github_redelivery_tries` one row per ask.
 *
 * Every change to the targets or to installation ownership is announced on the Postgres channel
 * `github_targets`, so each API process drops its cache of which targets a push matches.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('github_installations')
    .addColumn('rate_limited_until', 'timestamptz')
    .addColumn('rate_limit_strikes', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('github_connector_targets').addColumn('default_branch', 'text').execute();
  await db.schema
    .alterTable('github_reconcile_state')
    .addColumn('carried_cursor', 'text')
    .addColumn('carried_until', 'timestamptz')
    .execute();

  await db.schema
    .createTable('github_redeliveries')
    .addColumn('guid', 'text', (c) => c.primaryKey())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('last_attempt_id', 'bigint', (c) => c.notNull())
    .addColumn('last_status_code', 'integer', (c) => c.notNull())
    .addColumn('asked_attempt_id', 'bigint')
    .addColumn('tries', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('uncounted_tries', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('outcome', 'text', (c) =>
      c.notNull().check(sql`outcome IN ('asked', 'delivered', 'capped', 'rejected', 'ask_refused', 'ask_failed')`),
    )
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('github_redeliveries_updated').on('github_redeliveries').column('updated_at').execute();
  await db.schema
    .createTable('github_redelivery_tries')
    .addColumn('guid', 'text', (c) => c.notNull().references('github_redeliveries.guid').onDelete('cascade'))
    .addColumn('attempt_id', 'bigint', (c) => c.notNull())
    .addColumn('counted', 'boolean', (c) => c.notNull())
    .addColumn('answer', 'text', (c) => c.notNull())
    .addColumn('asked_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('github_redelivery_tries_pk', ['guid', 'attempt_id', 'asked_at'])
    .execute();

  await sql`CREATE FUNCTION github_targets_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_notify('github_targets', ''); RETURN NULL; END $$`.execute(db);
  // Only what decides which targets a push matches: a sync's own writes (heads, last sync) stay quiet.
  await sql`CREATE TRIGGER github_targets_changed
    AFTER INSERT OR DELETE OR UPDATE OF status, ref, default_branch, repository_id, repository_full_name, installation_id, organization_id
    ON github_connector_targets FOR EACH STATEMENT EXECUTE FUNCTION github_targets_changed()`.execute(db);
  await sql`CREATE TRIGGER github_installations_changed
    AFTER INSERT OR DELETE OR UPDATE OF organization_id
    ON github_installations FOR EACH STATEMENT EXECUTE FUNCTION github_targets_changed()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS github_installations_changed ON github_installations`.execute(db);
  await sql`DROP TRIGGER IF EXISTS github_targets_changed ON github_connector_targets`.execute(db);
  await sql`DROP FUNCTION IF EXISTS github_targets_changed()`.execute(db);
  await db.schema.dropTable('github_redelivery_tries').ifExists().execute();
  await db.schema.dropTable('github_redeliveries').ifExists().execute();
  await db.schema.alterTable('github_reconcile_state').dropColumn('carried_cursor').dropColumn('carried_until').execute();
  await db.schema.alterTable('github_connector_targets').dropColumn('default_branch').execute();
  await db.schema.alterTable('github_installations').dropColumn('rate_limited_until').dropColumn('rate_limit_strikes').execute();
}
