import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // The reconcile's cursor: when it last listed the App's deliveries.
  await db.schema
    .createTable('github_reconcile_state')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('last_run_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('github_reconcile_state').ifExists().execute();
}
