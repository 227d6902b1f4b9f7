import { type Kysely, sql } from 'kysely';

/**
 * A Slack thread as a conversation: the threads a connection has answered in (the index that lets
 * the events route ignore every other channel message with one key lookup), the messages of those
 * threads the service holds (the asks, its answers, and what others wrote there: a run's context),
 * whom a thread already asked to link, and whose request in a thread is queued behind another.
 * A connection's conversation settings (follow-ups without a mention, its suggested prompts), what
 * its Slack app is known to have (scopes and events, to tell when its manifest is outdated), and
 * Slack's refusal of the assistant methods, once remembered. And when each member's Home tab or
 * suggested prompts were last asked for, to publish them at most once per SLACK_HOME_MIN_INTERVAL.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('slack_connections')
    .addColumn('thread_follow_ups', 'text')
    .addColumn('suggested_prompts', 'jsonb')
    .addColumn('app_scopes', sql`text[]`)
    .addColumn('app_events', sql`text[]`)
    .addColumn('assistant_refused', 'text')
    .addColumn('assistant_refused_at', 'timestamptz')
    .execute();

  await db.schema
    .createTable('slack_threads')
    .addColumn('connection_id', 'text', (c) => c.notNull().references('slack_connections.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('thread_ts', 'text', (c) => c.notNull())
    .addColumn('organization_id', 'text', (c) => c.notNull())
    .addColumn('asker_slack_user_id', 'text', (c) => c.notNull())
    .addColumn('asker_member_id', 'text', (c) => c.notNull())
    .addColumn('permalink', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('slack_threads_pk', ['connection_id', 'channel', 'thread_ts'])
    .execute();
  await db.schema.createIndex('slack_threads_idle').on('slack_threads').column('updated_at').execute();

  await db.schema
    .createTable('slack_thread_messages')
    .addColumn('connection_id', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('thread_ts', 'text', (c) => c.notNull())
    .addColumn('ts', 'text', (c) => c.notNull())
    .addColumn('slack_user_id', 'text')
    .addColumn('bot', 'boolean', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('slack_thread_messages_pk', ['connection_id', 'channel', 'thread_ts', 'ts'])
    .addForeignKeyConstraint(
      'slack_thread_messages_thread',
      ['connection_id', 'channel', 'thread_ts'],
      'slack_threads',
      ['connection_id', 'channel', 'thread_ts'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();

  await db.schema
    .createTable('slack_thread_prompts')
    .addColumn('connection_id', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('thread_ts', 'text', (c) => c.notNull())
    .addColumn('slack_user_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('slack_thread_prompts_pk', ['connection_id', 'channel', 'thread_ts', 'slack_user_id'])
    .addForeignKeyConstraint(
      'slack_thread_prompts_thread',
      ['connection_id', 'channel', 'thread_ts'],
      'slack_threads',
      ['connection_id', 'channel', 'thread_ts'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();

  await db.schema
    .alterTable('slack_member_invocations')
    .addColumn('channel', 'text')
    .addColumn('thread_ts', 'text')
    .addColumn('workflow_id', 'text')
    .execute();
  await db.schema
    .createIndex('slack_member_invocations_thread')
    .on('slack_member_invocations')
    .columns(['connection_id', 'channel', 'thread_ts'])
    .where(sql.ref('ended_at'), 'is', null)
    .execute();

  await db.schema
    .createTable('slack_surface_requests')
    .addColumn('connection_id', 'text', (c) => c.notNull().references('slack_connections.id').onDelete('cascade'))
    .addColumn('slack_user_id', 'text', (c) => c.notNull())
    .addColumn('surface', 'text', (c) => c.notNull())
    .addColumn('requested_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('slack_surface_requests_pk', ['connection_id', 'slack_user_id', 'surface'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('slack_surface_requests').ifExists().execute();
  await db.schema.dropIndex('slack_member_invocations_thread').ifExists().execute();
  for (const column of ['workflow_id', 'thread_ts', 'channel']) {
    await db.schema.alterTable('slack_member_invocations').dropColumn(column).execute();
  }
  await db.schema.dropTable('slack_thread_prompts').ifExists().execute();
  await db.schema.dropTable('slack_thread_messages').ifExists().execute();
  await db.schema.dropTable('slack_threads').ifExists().execute();
  for (const column of [
    'assistant_refused_at',
    'assistant_refused',
    'app_events',
    'app_scopes',
    'suggested_prompts',
    'thread_follow_ups',
  ]) {
    await db.schema.alterTable('slack_connections').dropColumn(column).execute();
  }
}
