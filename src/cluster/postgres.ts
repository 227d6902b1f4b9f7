/**
 * Postgres for the production topology: the server in DATABASE_URL, or embedded binaries
 * running a cluster of their own under DATA_DIR/cluster (apart from `npm start`'s). It holds
 * the service's tables and Temporal's two databases, whose schemas Temporal's own SQL tool
 * creates and migrates, as it would on any Postgres server.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import type { ClusterConfig } from './settings';
import { startEmbeddedPostgres } from '../app/store/embedded-postgres';
import type { Logger } from '../app/log';
import { trackForForcedExit } from './process';

const exec = promisify(execFile);

export interface ClusterPostgres {
  /** The service's database. */
  url: string;
  host: string;
  port: number;
  user: string;
  password: string;
  embedded: boolean;
  stop(): Promise<void>;
}

export const TEMPORAL_DATABASES = [
  { name: 'temporal', schema: 'postgresql/v12/temporal' },
  { name: 'temporal_visibility', schema: 'postgresql/v12/visibility' },
] as const;

export async function clusterPostgres(config: ClusterConfig, clusterDir: string, log: Logger): Promise<ClusterPostgres> {
  let url = config.database.url;
  let stop: () => Promise<void> = async () => undefined;
  if (!url) {
    const pg = await startEmbeddedPostgres({
      dataDir: clusterDir,
      port: config.cluster.postgresPort,
      log,
      logFile: path.join(clusterDir, 'logs', 'postgres.log'),
    });
    url = pg.url;
    const untrack = pg.pid === undefined ? () => undefined : trackForForcedExit(pg.pid);
    stop = () => pg.stop().finally(untrack);
  }
  const parsed = new URL(url);
  return {
    url,
    host: parsed.hostname,
    port: Number(parsed.port || 5432),
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
    embedded: !config.database.url,
    stop,
  };
}

/**
 * Creates Temporal's databases when missing, sets up schema versioning on a fresh one, and
 * migrates both to the newest schema the tool carries. Safe to run at every start: each step
 * is skipped or a no-op when already done.
 */
export async function ensureTemporalSchemas(pg: ClusterPostgres, sqlTool: string, log: Logger): Promise<void> {
  for (const database of TEMPORAL_DATABASES) {
    await createDatabase(pg, database.name);
    const tool = (args: string[]) =>
      exec(
        sqlTool,
        ['--plugin', 'postgres12', '--ep', pg.host, '-p', String(pg.port), '-u', pg.user, '--db', database.name, ...args],
        // The password travels in the environment, never on a command line other users can read.
        { env: { SQL_PASSWORD: pg.password, PATH: '/usr/bin:/bin' }, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 },
      );
    if (!(await hasSchemaVersioning(pg, database.name))) {
      await tool(['setup-schema', '-v', '0.0']);
      log.info({ database: database.name }, 'set up Temporal schema versioning');
    }
    await tool(['update-schema', '--schema-name', database.schema]);
  }
}

async function withClient<T>(pg: ClusterPostgres, database: string | undefined, use: (client: Client) => Promise<T>): Promise<T> {
  const url = new URL(pg.url);
  if (database) url.pathname = `/${database}`;
  const client = new Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function createDatabase(pg: ClusterPostgres, name: string): Promise<void> {
  await withClient(pg, undefined, async (client) => {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount) return;
    try {
      // Identifiers cannot be bound parameters; `name` is one of TEMPORAL_DATABASES.
      await client.query(`CREATE DATABASE "${name}"`);
    } catch (error) {
      // 42P04 duplicate_database: another launcher created it first.
      if ((error as { code?: string }).code !== '42P04') throw error;
    }
  });
}

async function hasSchemaVersioning(pg: ClusterPostgres, database: string): Promise<boolean> {
  return withClient(pg, database, async (client) => {
    const { rows } = await client.query<{ found: string | null }>("SELECT to_regclass('public.schema_version')::text AS found");
    return rows[0]?.found !== null && rows[0]?.found !== undefined;
  });
}
