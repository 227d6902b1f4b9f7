import type { Kysely } from 'kysely';

/**
 * What Slack's own limits need shared by every worker replica: a token bucket per connection and
 * Web API method (src/slack/budget.ts), and, per connection, whether Slack refused its streaming
 * methods (the thread then keeps to edits, src/slack/outbound.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('slack_api_budgets')
    .addColumn('connection_id', 'text', (c) => c.notNull())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('tokens', 'double precision', (c) => c.notNull())
    .addColumn('refreshed_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('slack_api_budgets_pk', ['connection_id', 'method'])
    .execute();
  await db.schema.alterTable('slack_connections').addColumn('streaming_refused', 'text').execute();
  await db.schema.alterTable('slack_connections').addColumn('streaming_refused_at', 'timestamptz').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('slack_connections').dropColumn('streaming_refused_at').execute();
  await db.schema.alterTable('slack_connections').dropColumn('streaming_refused').execute();
  await db.schema.dropTable('slack_api_budgets').ifExists().execute();
}
