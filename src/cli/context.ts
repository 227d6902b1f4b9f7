/**
 * The context every `den` command runs in (src/app/cli.ts): the config and a database, and for
 * the commands that need it a gateway to Temporal. The database is DATABASE_URL; else the
 * Postgres of the `npm run cluster` running under DATA_DIR; else the embedded one, started for
 * the duration of the command when it isn't already running (and stopped afterwards). Temporal
 * is TEMPORAL_ADDRESS, else the embedded dev server of a running `npm start`.
 */
import type { CliContext, CliDatabase } from '../app/cli';
import { loadPlatformConfig } from '../app/config';
import { embeddedPostgresOptions, startEmbeddedPostgres } from '../app/store/embedded-postgres';
import { createLogger } from '../app/log';
import { openDatabase } from '../app/store/db';
import { migrateToLatest } from '../app/store/migrate';
import { loadSecretKeys } from '../app/secrets';
import { createTemporalClient } from '../app/temporal/client';
import { runningClusterDatabase } from '../cluster/state';
import { unadmittedGateway } from '../main/gateway';

/** The context of every command but its feature's settings, which `den` adds per feature (src/cli/den.ts). */
export const cliContext: Omit<CliContext, 'settings'> = {
  withDatabase,
  withTemporal: (action) =>
    withDatabase(async (context) => {
      const { config } = context;
      const temporal = createTemporalClient({
        address: config.temporal.address ?? `127.0.0.1:${config.temporal.devPort}`,
        namespace: config.temporal.namespace,
        taskQueue: config.temporal.taskQueue,
      });
      const log = createLogger({ level: 'warn', name: 'den-cli', destination: process.stderr });
      try {
        return await action({ ...context, ingress: unadmittedGateway({ temporal, db: context.db, log, config }) });
      } finally {
        await temporal.close();
      }
    }),
};

async function withDatabase<T>(fn: (ctx: CliDatabase) => Promise<T>): Promise<T> {
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
