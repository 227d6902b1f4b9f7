import { Kysely, PostgresDialect } from 'kysely';
import { Pool } from 'pg';
import type { Database } from './schema';

export type Db = Kysely<Database>;

export interface DbHandle {
  db: Db;
  pool: Pool;
  close(): Promise<void>;
}

/**
 * One pool per process. `connectionTimeoutMillis` keeps a request from hanging when Postgres
 * is down: the pool gives up quickly and the route answers 503.
 */
export function openDatabase(url: string, options: { max?: number } = {}): DbHandle {
  const pool = new Pool({
    connectionString: url,
    max: options.max ?? 10,
    connectionTimeoutMillis: 3000,
    idleTimeoutMillis: 30_000,
    // Keep the API alive when Postgres restarts; the pool reconnects on the next query.
    allowExitOnIdle: false,
  });
  // An idle client that loses its server emits 'error' on the pool; without a listener Node
  // would crash the process. The next query opens a fresh connection.
  pool.on('error', () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    close: () => db.destroy(),
  };
}

/** A cheap liveness probe for /ready; the pool's connection timeout bounds it. */
export async function pingDatabase(pool: Pool): Promise<void> {
  await pool.query('SELECT 1');
}
