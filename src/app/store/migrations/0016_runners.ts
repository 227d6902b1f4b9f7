import { type Kysely, sql } from 'kysely';

/**
 * Runtimes people can trust.
 *
 * `runners` and `runner_tokens` (identity): a runner is one runtime a member registered by minting
 * a runner token (`POST /v1/automation-runners/token`); each token is stored as its SHA-256 hash
 * only, bound to its runner, and lives until `expires_at`. A runner keeps the id of the API key
 * that minted it (null when a session did), so revoking that key stops every token of the runner.
 * `revoked_at` is `DELETE /v1/automation-runners/{runnerId}`.
 *
 * Every change that stops runner tokens (a runner revoked or deleted, an API key revoked or
 * deleted, a member removed or deleted) is announced on the Postgres channel `runner_tokens`, so
 * each API process forgets the tokens it remembered to ride out a Postgres outage
 * (src/identity/runner-auth.ts).
 *
 * `runner_presence` (runs): when each runtime was last seen claiming or heartbeating, whatever its
 * credential, written at most once per half presence window per runtime and API process
 * (src/runs/presence.ts), with the runs it was last seen working on. `runner_breakers` (runs): each
 * member's breaker (src/runs/breaker.ts): the recent runtime failures, and the pause they caused.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('runners')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('member_id', 'text', (c) => c.notNull().references('members.id').onDelete('cascade'))
    .addColumn('label', 'text')
    .addColumn('api_key_id', 'text', (c) => c.references('api_keys.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('revoked_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('runners_member').on('runners').columns(['organization_id', 'member_id']).execute();
  await db.schema
    .createTable('runner_tokens')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('runner_id', 'text', (c) => c.notNull().references('runners.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('runner_tokens_runner').on('runner_tokens').columns(['runner_id', 'expires_at']).execute();

  await db.schema
    .createTable('runner_presence')
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('runner_id', 'text', (c) => c.notNull())
    .addColumn('member_id', 'text', (c) => c.notNull())
    .addColumn('credential', 'text', (c) => c.notNull().check(sql`credential IN ('runner_token', 'api_key')`))
    .addColumn('label', 'text')
    .addColumn('version', 'text')
    .addColumn('first_seen_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_seen_at', 'timestamptz', (c) => c.notNull())
    .addColumn('runs', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addPrimaryKeyConstraint('runner_presence_pk', ['organization_id', 'runner_id'])
    .execute();
  await db.schema.createIndex('runner_presence_member').on('runner_presence').columns(['organization_id', 'member_id']).execute();
  await db.schema
    .createTable('runner_breakers')
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('member_id', 'text', (c) => c.notNull())
    .addColumn('state', 'jsonb', (c) => c.notNull())
    .addColumn('paused_until', 'timestamptz')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('runner_breakers_pk', ['organization_id', 'member_id'])
    .execute();

  await sql`CREATE FUNCTION runner_tokens_stopped() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_notify('runner_tokens', ''); RETURN NULL; END $$`.execute(db);
  await sql`CREATE TRIGGER runners_stopped AFTER DELETE OR UPDATE OF revoked_at
    ON runners FOR EACH STATEMENT EXECUTE FUNCTION runner_tokens_stopped()`.execute(db);
  await sql`CREATE TRIGGER api_keys_stop_runners AFTER DELETE OR UPDATE OF revoked_at, expires_at
    ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION runner_tokens_stopped()`.execute(db);
  await sql`CREATE TRIGGER members_stop_runners AFTER DELETE OR UPDATE OF removed_at
    ON members FOR EACH STATEMENT EXECUTE FUNCTION runner_tokens_stopped()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS members_stop_runners ON members`.execute(db);
  await sql`DROP TRIGGER IF EXISTS api_keys_stop_runners ON api_keys`.execute(db);
  await sql`DROP TRIGGER IF EXISTS runners_stopped ON runners`.execute(db);
  await sql`DROP FUNCTION IF EXISTS runner_tokens_stopped()`.execute(db);
  for (const table of ['runner_breakers', 'runner_presence', 'runner_tokens', 'runners']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
