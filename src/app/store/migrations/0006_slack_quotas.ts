import { type Kysely, sql } from 'kysely';

/**
 * Slack invocation quotas shared by every API replica: one counter per quota key and
 * fixed window, taken with an atomic upsert (src/slack/quota.ts). The window_start index serves
 * the bounded sweep of expired windows, oldest first.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('slack_quota_windows')
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('used', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('slack_quota_windows_pk', ['key', 'window_start'])
    .addCheckConstraint('slack_quota_windows_used', sql`used >= 0`)
    .execute();
  await db.schema.createIndex('slack_quota_windows_window_start').on('slack_quota_windows').column('window_start').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('slack_quota_windows').ifExists().execute();
}
