import { type ColumnType, type Kysely, sql } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface SlackTables {
  /** One Slack app installation in one workspace, owned by an organization (issue #5). */
  slack_connections: {
    /** typeid, prefix `emc` (spec 2.1). */
    id: string;
    organization_id: string;
    team_id: string;
    api_app_id: string;
    /** AES-256-GCM sealed (src/secrets.ts); never stored in the clear. */
    signing_secret: string;
    /** The secret before the last rotation, sealed, accepted until `previous_secret_expires_at`. */
    previous_signing_secret: string | null;
    previous_secret_expires_at: NullableTimestamp;
    /** Sealed `xoxb-` token; without one the service never calls Slack for this connection. */
    bot_token: string | null;
    bot_user_id: string | null;
    /** Channel allowlist; null or empty = every channel. DMs are always allowed. */
    channels: string[] | null;
    enabled: boolean;
    /** Why it was disabled (`app_uninstalled`, `tokens_revoked`, `operator`). */
    disabled_reason: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
  };
  /** A Slack user of a connection, proven (by a one-time link token) to be this member. */
  slack_account_links: {
    connection_id: string;
    slack_user_id: string;
    organization_id: string;
    member_id: string;
    created_at: Timestamp;
  };
  /** Nonces of redeemed link tokens: a token works once. */
  slack_used_link_tokens: {
    nonce: string;
    connection_id: string;
    slack_user_id: string;
    member_id: string;
    used_at: Timestamp;
    /** After this the token is expired anyway, so the row may be pruned. */
    expires_at: Timestamp;
  };
  /** Invocations held for a link (status awaiting_link): the link route signals their workflows. */
  slack_pending_invocations: {
    connection_id: string;
    event_id: string;
    slack_user_id: string;
    workflow_id: string;
    created_at: Timestamp;
    expires_at: Timestamp;
  };
  /** Runs created from Slack, per member: the rolling-day and concurrency limits count these. */
  slack_member_invocations: {
    connection_id: string;
    event_id: string;
    organization_id: string;
    member_id: string;
    run_id: string;
    started_at: Timestamp;
    ended_at: NullableTimestamp;
  };
}

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
