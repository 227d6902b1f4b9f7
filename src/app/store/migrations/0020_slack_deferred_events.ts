import { type Kysely, sql } from 'kysely';

/**
 * Slack events acknowledged before Temporal took them (src/slack/deferred-events.ts): when the
 * engine does not take an event's workflow within SLACK_EVENT_ACK_WAIT (busy, or down), the
 * event is kept here, keyed by its workflow id, and acked; the start that was under way, or the
 * worker's sweep after it, starts the workflow and deletes the row. `next_attempt_at` is when a
 * sweep may try it (a start under way holds it until then), `attempts` how many sweeps did.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('slack_deferred_events')
    .addColumn('workflow_id', 'text', (c) => c.primaryKey())
    .addColumn('connection_id', 'text', (c) => c.notNull())
    .addColumn('organization_id', 'text', (c) => c.notNull())
    .addColumn('input', 'jsonb', (c) => c.notNull())
    .addColumn('received_at', 'timestamptz', (c) => c.notNull())
    .addColumn('next_attempt_at', 'timestamptz', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('slack_deferred_events_due').on('slack_deferred_events').columns(['next_attempt_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('slack_deferred_events').execute();
}
