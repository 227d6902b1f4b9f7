import { type Kysely, sql } from 'kysely';

/**
 * Slack connections an admin sets up through the API: a draft has no workspace, app or signing
 * secret until its credentials are set and Slack's OAuth install binds it; the app's client
 * credentials (the secret sealed like the others), who installed it and when, and when Slack
 * said it was uninstalled. And the short codes a member types to link their Slack account
 * (`den slack link <code>`), each standing for a link token's claims.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('slack_connections')
    .alterColumn('team_id', (c) => c.dropNotNull())
    .alterColumn('api_app_id', (c) => c.dropNotNull())
    .alterColumn('signing_secret', (c) => c.dropNotNull())
    .addColumn('name', 'text')
    .addColumn('client_id', 'text')
    .addColumn('client_secret', 'text')
    .addColumn('team_name', 'text')
    .addColumn('installed_at', 'timestamptz')
    .addColumn('installed_by', 'text')
    .addColumn('uninstalled_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('slack_connections_team_app').on('slack_connections').columns(['team_id', 'api_app_id']).execute();

  await db.schema
    .createTable('slack_link_codes')
    .addColumn('code_hash', 'text', (c) => c.primaryKey())
    .addColumn('connection_id', 'text', (c) => c.notNull().references('slack_connections.id').onDelete('cascade'))
    .addColumn('team_id', 'text', (c) => c.notNull())
    .addColumn('slack_user_id', 'text', (c) => c.notNull())
    .addColumn('nonce', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('slack_link_codes_expiry').on('slack_link_codes').column('expires_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('slack_link_codes').ifExists().execute();
  await db.schema.dropIndex('slack_connections_team_app').ifExists().execute();
  for (const column of ['uninstalled_at', 'installed_by', 'installed_at', 'team_name', 'client_secret', 'client_id', 'name']) {
    await db.schema.alterTable('slack_connections').dropColumn(column).execute();
  }
}
