import type { Kysely } from 'kysely';

/**
 * Replay defences for the signed webhooks. `slack_request_replays` holds each verified Slack
 * request's (connection, timestamp, signature) until its signature window closes, shared by every
 * API replica (src/slack/replays.ts); the expires_at index serves the worker's bounded sweep.
 * `github_delivery_digests` maps each accepted GitHub body's sha256, per installation, to the
 * delivery id that first carried it (src/github/digests.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('slack_request_replays')
    .addColumn('connection_id', 'text', (c) => c.notNull())
    .addColumn('request_timestamp', 'bigint', (c) => c.notNull())
    .addColumn('signature', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('slack_request_replays_pk', ['connection_id', 'request_timestamp', 'signature'])
    .execute();
  await db.schema.createIndex('slack_request_replays_expires_at').on('slack_request_replays').column('expires_at').execute();

  await db.schema
    .createTable('github_delivery_digests')
    .addColumn('installation_id', 'bigint', (c) => c.notNull())
    .addColumn('body_sha256', 'text', (c) => c.notNull())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('github_delivery_digests_pk', ['installation_id', 'body_sha256'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('github_delivery_digests').ifExists().execute();
  await db.schema.dropTable('slack_request_replays').ifExists().execute();
}
