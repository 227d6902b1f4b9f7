import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient } from 'kysely';
import { Pool, type PoolClient } from 'pg';
import { errors } from '../errors';
import { createChannels, type Channels } from './channels';
import type { Database } from './schema';

export type Db = Kysely<Database>;

export interface DbHandle {
  db: Db;
  pool: Pool;
  /** Postgres notifications (LISTEN) on a connection of their own, opened at the first subscription. */
  channels: Channels;
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
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: outageAwarePool(pool) }) });
  const channels = createChannels(url);
  return {
    db,
    pool,
    channels,
    close: async () => {
      await channels.close();
      await db.destroy();
    },
  };
}

/** A cheap liveness probe for /ready; the pool's connection timeout bounds it. */
export async function pingDatabase(pool: Pool): Promise<void> {
  await pool.query('SELECT 1');
}

/** SQLSTATE class 08 (connection exception) and 57P0x (server shutting down or starting). */
const OUTAGE_SQLSTATE = /^(08...|57P0[1-3])$/;
const OUTAGE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/** pg's own connection failures carry no code, only these messages. */
const OUTAGE_MESSAGE = /timeout exceeded when trying to connect|Connection terminated|connection error|Client was closed/i;

/** Whether a query failed because Postgres could not be reached (vs. a constraint, data or SQL error). */
function isPostgresOutage(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  if (typeof e.code === 'string' && (OUTAGE_SQLSTATE.test(e.code) || OUTAGE_ERRNO.has(e.code))) return true;
  return typeof e.message === 'string' && OUTAGE_MESSAGE.test(e.message);
}

const asOutage = (error: unknown): unknown => (isPostgresOutage(error) ? errors.unavailable('postgres', error) : error);

/**
 * The pool as Kysely sees it, with the dependency named at its boundary: a connection that
 * cannot be had, or a query cut off by an outage, becomes a coded 503 (`unavailable`,
 * dependency `postgres`), so no caller has to guess where an error came from. Constraint and
 * data errors pass through unchanged, with their SQLSTATE.
 */
function outageAwarePool(pool: Pool): PostgresPool {
  return {
    async connect(): Promise<PostgresPoolClient> {
      let client: PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        throw errors.unavailable('postgres', error);
      }
      // A checked-out client whose server goes away between two queries emits 'error', and
      // without a listener that would crash the process. Its next query fails, as a 503.
      const ignoreLostConnection = () => undefined;
      client.on('error', ignoreLostConnection);
      return {
        query: ((sql: unknown, parameters?: unknown) => {
          const result = (client.query as (a: unknown, b?: unknown) => unknown)(sql, parameters);
          // Cursors (streaming) return an object, not a promise: pass them through.
          return result instanceof Promise ? result.catch((error: unknown) => Promise.reject(asOutage(error))) : result;
        }) as PostgresPoolClient['query'],
        release: () => {
          client.off('error', ignoreLostConnection);
          client.release();
        },
      };
    },
    end: () => pool.end(),
  };
}
