import { type Kysely, sql } from 'kysely';

/**
 * Fair shares per organization. `organizations.fairness_weight` is the organization's share of the
 * engine's dispatch (null: the default, 1), read at start time (src/app/temporal/fairness.ts), so
 * an operator changes it without a deploy. `admission_windows` counts each organization's
 * accepted requests per fixed window for every API replica at once (src/app/admission.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('organizations')
    .addColumn('fairness_weight', 'double precision', (c) => c.check(sql`fairness_weight >= 0.001 AND fairness_weight <= 1000`))
    .execute();
  await db.schema
    .createTable('admission_windows')
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('used', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('admission_windows_pk', ['key', 'window_start'])
    .addCheckConstraint('admission_windows_used', sql`used >= 0`)
    .execute();
  await db.schema.createIndex('admission_windows_window_start').on('admission_windows').column('window_start').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('admission_windows').ifExists().execute();
  await db.schema.alterTable('organizations').dropColumn('fairness_weight').execute();
}
