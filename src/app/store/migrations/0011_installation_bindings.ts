import { type Kysely, sql } from 'kysely';

/**
 * Installations belong to organizations, and install flows carry a signed single-use state.
 *
 * `github_installations` binds each GitHub App installation to the one organization that owns
 * it; only the owner may connect targets on it, and its deliveries count against the owner's
 * share. Existing targets are backfilled here, the one data change of this migration: an
 * installation whose targets all belong to one organization is bound to it; an installation
 * named by targets of several organizations is left unbound (whose it is cannot be told from
 * the rows), and its active targets are disabled with reason `installation_unbound` until an
 * operator binds it.
 *
 * `github_connector_targets.repository_verified_at` is when the installation was last seen to
 * reach the target's repository; null (every target created before this migration) means the
 * next sync checks it first.
 *
 * `flow_states` holds one row per issued install-flow state (src/app/install-flow.ts), claimed
 * once by the flow's callback; rows are pruned some time after they expire.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('github_installations')
    .addColumn('installation_id', 'bigint', (c) => c.primaryKey())
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('account_login', 'text')
    .addColumn('bound_via', 'text', (c) => c.notNull().check(sql`bound_via IN ('migration', 'operator', 'install_flow')`))
    .addColumn('bound_by_member_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('github_installations_organization').on('github_installations').column('organization_id').execute();
  await db.schema.alterTable('github_connector_targets').addColumn('repository_verified_at', 'timestamptz').execute();

  await sql`
    INSERT INTO github_installations (installation_id, organization_id, bound_via)
    SELECT installation_id, min(organization_id), 'migration'
    FROM github_connector_targets
    GROUP BY installation_id
    HAVING count(DISTINCT organization_id) = 1`.execute(db);
  await sql`
    UPDATE github_connector_targets t
    SET status = 'disabled', status_reason = 'installation_unbound', updated_at = now()
    WHERE t.status = 'active'
      AND NOT EXISTS (SELECT 1 FROM github_installations i WHERE i.installation_id = t.installation_id)`.execute(db);

  await db.schema
    .createTable('flow_states')
    .addColumn('nonce', 'text', (c) => c.primaryKey())
    .addColumn('purpose', 'text', (c) => c.notNull())
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('member_id', 'text', (c) => c.notNull())
    .addColumn('subject', 'text')
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('used_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('flow_states_expires_at').on('flow_states').column('expires_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('flow_states').ifExists().execute();
  await db.schema.alterTable('github_connector_targets').dropColumn('repository_verified_at').execute();
  await db.schema.dropTable('github_installations').ifExists().execute();
}
