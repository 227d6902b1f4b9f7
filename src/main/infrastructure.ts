/**
 * One process's infrastructure: the servers it connects to (or the embedded ones it starts), and
 * the clients every feature shares (Postgres, Temporal, metrics, the secret key).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { publicBaseUrl } from '../app/config';
import type { Feature, PlatformValues } from '../app/feature';
import type { Logger } from '../app/log';
import { createMetrics, type Metrics } from '../app/metrics';
import { loadSecretKeys, type SecretKeys } from '../app/secrets';
import { openDatabase, type DbHandle } from '../app/store/db';
import { embeddedPostgresOptions, startEmbeddedPostgres } from '../app/store/embedded-postgres';
import { createTemporalClient, type TemporalClientHandle } from '../app/temporal/client';
import { devServerDbFile, findTemporalCli, startDevServer } from '../app/temporal/dev-server';
import { FAIRNESS_DYNAMIC_CONFIG } from '../app/temporal/fairness';
import type { Config } from './config';
import { SEARCH_ATTRIBUTES } from './features';

export interface Dependencies {
  databaseUrl: string;
  temporalAddress: string;
  temporalUiUrl: string | undefined;
  embedded: { postgres: boolean; temporal: boolean };
  stop(): Promise<void>;
}

/** Connects to the configured servers, or starts the embedded ones where an address is unset. */
export async function ensureDependencies(config: Config, log: Logger, allowEmbedded: boolean): Promise<Dependencies> {
  const needsEmbedded = !config.database.url || !config.temporal.address;
  if (needsEmbedded && !allowEmbedded) {
    const missing = [!config.database.url && 'DATABASE_URL', !config.temporal.address && 'TEMPORAL_ADDRESS'].filter(Boolean);
    throw new Error(
      `${missing.join(' and ')} unset. This process does not start embedded servers unless EMBEDDED=true ` +
        '(production must never start a dev server by accident). Use `npm start` for the all-in-one development stack.',
    );
  }
  await fs.mkdir(config.dataDir, { recursive: true });
  const stops: (() => Promise<void>)[] = [];
  try {
    let databaseUrl = config.database.url;
    if (!databaseUrl) {
      const pg = await startEmbeddedPostgres(embeddedPostgresOptions(config, log));
      stops.push(pg.stop);
      databaseUrl = pg.url;
    }
    let temporalAddress = config.temporal.address;
    let temporalUiUrl: string | undefined;
    if (!temporalAddress) {
      const cli = await findTemporalCli(config.temporal.cliPath, log);
      log.info({ source: cli.source, path: cli.path }, 'using Temporal CLI');
      const server = await startDevServer({
        cli,
        port: config.temporal.devPort,
        uiPort: config.temporal.uiPort,
        headless: config.temporal.devHeadless,
        dbFile: devServerDbFile(config.dataDir),
        sqliteSynchronous: config.temporal.devSqliteSynchronous,
        namespace: config.temporal.namespace,
        searchAttributes: SEARCH_ATTRIBUTES,
        dynamicConfig: config.temporal.fairness ? FAIRNESS_DYNAMIC_CONFIG : [],
        logFile: path.join(config.dataDir, 'logs', 'temporal.log'),
        log,
      });
      stops.push(server.stop);
      temporalAddress = server.address;
      temporalUiUrl = server.uiUrl;
    }
    return {
      databaseUrl,
      temporalAddress,
      temporalUiUrl,
      embedded: { postgres: !config.database.url, temporal: !config.temporal.address },
      // Children stop in reverse order of start.
      stop: async () => {
        for (const stop of stops.reverse()) await stop().catch((error: unknown) => log.warn({ err: error }, 'stop failed'));
      },
    };
  } catch (error) {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    throw error;
  }
}

/** The shared infrastructure of one process; features receive the parts they declare. */
export interface Infrastructure {
  config: Config;
  log: Logger;
  metrics: Metrics;
  database: DbHandle;
  temporal: TemporalClientHandle;
  /** Keys for secrets at rest and signed tokens: SECRET_KEY, and SECRET_KEY_PREVIOUS during a rotation. */
  secretKey: SecretKeys;
  /** Set when shutdown begins: /ready answers 503 from then on. */
  lifecycle: { shuttingDown: boolean };
}

export async function createInfrastructure(
  config: Config,
  log: Logger,
  deps: { databaseUrl: string; temporalAddress: string; embedded: boolean },
): Promise<Infrastructure> {
  const database = openDatabase(deps.databaseUrl, { max: config.database.poolMax });
  const temporal = createTemporalClient({
    address: deps.temporalAddress,
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
  });
  const secretKey = await loadSecretKeys({
    configured: config.secretKey,
    previous: config.secretKeyPrevious,
    dataDir: config.dataDir,
    embedded: deps.embedded,
  });
  return {
    config,
    log,
    metrics: createMetrics({ defaultMetrics: true }),
    database,
    temporal,
    secretKey,
    lifecycle: { shuttingDown: false },
  };
}

/** The platform's values a feature may read besides its own settings. */
export function platformValues(config: Config): PlatformValues {
  return {
    publicBaseUrl: publicBaseUrl(config),
    taskQueue: config.temporal.taskQueue,
    authCaches: config.authCaches,
  };
}

/** A feature's own settings, as the configuration parsed them. */
export function settingsOf(config: Config, feature: Feature): unknown {
  return (config as unknown as Record<string, unknown>)[feature.name];
}
