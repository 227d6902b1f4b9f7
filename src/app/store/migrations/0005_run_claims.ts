import { type Kysely, sql } from 'kysely';

/**
 * Claims of runs by runtimes. `claim_pending_until` lets concurrent claim-next pollers pick different
 * candidates (a short hold taken with FOR UPDATE SKIP LOCKED); the run workflow's claim Update
 * still decides. The index serves "oldest claimable run of the organization".
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('automation_runs').addColumn('claim_pending_until', 'timestamptz').execute();
  await sql`CREATE INDEX automation_runs_claimable ON automation_runs (organization_id, created_at, run_id)
    WHERE status IN ('queued', 'awaiting_retry')`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS automation_runs_claimable`.execute(db);
  await db.schema.alterTable('automation_runs').dropColumn('claim_pending_until').execute();
}
