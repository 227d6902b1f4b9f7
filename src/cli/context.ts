/**
 * What every `den` command gets: the config and a database. The database is DATABASE_URL; else
 * the Postgres of the `npm run cluster` running under DATA_DIR; else the embedded one, started
 * for the duration of the command when it isn't already running (and stopped afterwards).
 */
import { InvalidArgumentError } from 'commander';
import { loadPlatformConfig, type PlatformConfig } from '../app/config';
import { embeddedPostgresOptions, startEmbeddedPostgres } from '../app/store/embedded-postgres';
import { createLogger } from '../app/log';
import { openDatabase, type Db } from '../app/store/db';
import { migrateToLatest } from '../app/store/migrate';
import { loadSecretKeys, type SecretKeys } from '../app/secrets';
import { runningClusterDatabase } from '../cluster/state';

export interface CliContext {
  config: PlatformConfig;
  db: Db;
  secretKey: () => Promise<SecretKeys>;
}

/** Prints JSON on stdout; errors go to stderr with a non-zero exit (see den.ts). */
export function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export class CliError extends Error {}

/** A commander option parser for counts and ids that must be whole and positive. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('must be a positive whole number');
  return n;
}

export async function withCliContext<T>(fn: (ctx: CliContext) => Promise<T>): Promise<T> {
  const config = loadPlatformConfig();
  const log = createLogger({ level: 'warn', name: 'den-cli', destination: process.stderr });
  let stopPostgres: (() => Promise<void>) | undefined;
  let url = config.database.url;
  // A running cluster's service processes keep their embedded state (the generated secret key)
  // under DATA_DIR/cluster, so the CLI reads it there too.
  let secretsDir = config.dataDir;
  const cluster = url ? undefined : await runningClusterDatabase(config.dataDir);
  if (cluster) {
    url = cluster.url;
    secretsDir = cluster.dir;
    process.stderr.write(`den: using the Postgres of the cluster running under ${cluster.dir}\n`);
  }
  if (!url) {
    const pg = await startEmbeddedPostgres(embeddedPostgresOptions(config, log));
    url = pg.url;
    if (!pg.adopted) stopPostgres = pg.stop;
  }
  const database = openDatabase(url, { max: 2 });
  try {
    await migrateToLatest(database.db);
    return await fn({
      config,
      db: database.db,
      secretKey: () =>
        loadSecretKeys({
          configured: config.secretKey,
          previous: config.secretKeyPrevious,
          dataDir: secretsDir,
          embedded: !config.database.url || config.embeddedAllowed,
        }),
    });
  } finally {
    await database.close().catch(() => undefined);
    await stopPostgres?.();
  }
}
