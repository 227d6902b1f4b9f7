import { type Migration, type MigrationProvider, Migrator, sql } from 'kysely';
import type { Db } from './db';
import { migrations } from './migrations';

/** A fixed key, so every process of this service serializes on the same advisory lock. */
const MIGRATION_LOCK_KEY = 7_233_054_329;

class StaticProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return migrations;
  }
}

/**
 * Applies pending migrations. Idempotent, and serialized with a session-level advisory lock so
 * an API and a worker starting together don't race (Kysely's own lock table is per-migrator
 * and we want one lock across every process).
 */
export async function migrateToLatest(db: Db): Promise<string[]> {
  return db.connection().execute(async (conn) => {
    await sql`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`.execute(conn);
    try {
      const migrator = new Migrator({ db: conn, provider: new StaticProvider() });
      const { error, results } = await migrator.migrateToLatest();
      if (error) throw error instanceof Error ? error : new Error(String(error));
      return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    } finally {
      await sql`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`.execute(conn);
    }
  });
}
