import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('slack_connections')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('team_id', 'text', (c) => c.notNull())
    .addColumn('api_app_id', 'text', (c) => c.notNull())
    .addColumn('signing_secret', 'text', (c) => c.notNull())
    .addColumn('previous_signing_secret', 'text')
    .addColumn('previous_secret_expires_at', 'timestamptz')
    .addColumn('bot_token', 'text')
    .addColumn('bot_user_id', 'text')
    .addColumn('channels', sql`text[]`)
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('disabled_reason', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('slack_connections_org').on('slack_connections').column('organization_id').execute();

  await db.schema
    .createTable('slack_account_links')
    .addColumn('connection_id', 'text', (c) => c.notNull().references('slack_connections.id').onDelete('cascade'))
    .addColumn('slack_user_id', 'text', (c) => c.notNull())
    .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('member_id', 'text', (c) => c.notNull().references('members.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('slack_account_links_pk', ['connection_id', 'slack_user_id'])
    .execute();

  await db.schema
    .createTable('slack_used_link_tokens')
    .addColumn('nonce', 'text', (c) => c.primaryKey())
    .addColumn('connection_id', 'text', (c) => c.notNull().references('slack_connections.id').onDelete('cascade'))
    .addColumn('slack_user_id', 'text', (c) => c.notNull())
    .addColumn('member_id', 'text', (c) => c.notNull())
    .addColumn('used_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('slack_pending_invocations')
    .addColumn('connection_id', 'text', (c) => c.notNull().references('slack_connections.id').onDelete('cascade'))
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('slack_user_id', 'text', (c) => c.notNull())
    .addColumn('workflow_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('slack_pending_invocations_pk', ['connection_id', 'event_id'])
    .execute();
  await db.schema
    .createIndex('slack_pending_invocations_user')
    .on('slack_pending_invocations')
    .columns(['connection_id', 'slack_user_id'])
    .execute();

  await db.schema
    .createTable('slack_member_invocations')
    .addColumn('connection_id', 'text', (c) => c.notNull().references('slack_connections.id').onDelete('cascade'))
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('organization_id', 'text', (c) => c.notNull())
    .addColumn('member_id', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('ended_at', 'timestamptz')
    .addPrimaryKeyConstraint('slack_member_invocations_pk', ['connection_id', 'event_id'])
    .execute();
  await db.schema
    .createIndex('slack_member_invocations_member')
    .on('slack_member_invocations')
    .columns(['member_id', 'started_at'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of [
    'slack_member_invocations',
    'slack_pending_invocations',
    'slack_used_link_tokens',
    'slack_account_links',
    'slack_connections',
  ]) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
