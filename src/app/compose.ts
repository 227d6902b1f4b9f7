/**
 * The composition root: the one place that constructs things. It builds the infrastructure
 * (config, logger, metrics, Postgres, the Temporal client, the ingress gateway), then each
 * feature from exactly the dependencies it declares, and hands the routes to the front door and
 * the activities to the worker.
 *
 * `npm start` runs everything in one process (embedded Temporal and Postgres when their
 * addresses are unset); `npm run serve` and `npm run worker` are the production split and
 * refuse embedded servers unless EMBEDDED=true.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Config } from './config';
import { createApp } from './http/app';
import { listen, type HttpServer } from './http/server';
import type Koa from 'koa';
import type { AppState } from './http/context';
import { REMOVED_ROUTES, type RemovedRoute } from './http/deprecated';
import { createOpenApi } from './http/openapi';
import { createSystemRoutes } from './http/system-routes';
import { createIngressGateway, createNoEnqueueGateway } from './ingress';
import type { Metrics } from './metrics';
import type { DbHandle } from './store/db';
import type { TemporalClientHandle } from './temporal/client';
import type { McpNetworkOverrides } from '../mcp/network';
import type { Logger } from './log';
import { createMetrics } from './metrics';
import { loadSecretKeys, type SecretKeys } from './secrets';
import { embeddedPostgresOptions, startEmbeddedPostgres } from './store/embedded-postgres';
import { openDatabase } from './store/db';
import { migrateToLatest } from './store/migrate';
import { createTemporalClient } from './temporal/client';
import { ensureSearchAttributes } from './temporal/search-attributes';
import { devServerDbFile, findTemporalCli, startDevServer } from './temporal/dev-server';
import { startWorker, type WorkerHandle } from './temporal/worker';
import { createGithubFeature, githubSearchAttributes } from '../github';
import { createIdentityFeature } from '../identity';
import { createMcpFeature } from '../mcp';
import { createRunsFeature, runSearchAttributes, sweepStaleRuns } from '../runs';
import { createSlackFeature, slackSearchAttributes } from '../slack';

/** Every feature's custom search attributes, registered on the dev server and at start-up. */
export const SEARCH_ATTRIBUTES = [
  ...Object.values(runSearchAttributes),
  ...Object.values(slackSearchAttributes),
  ...Object.values(githubSearchAttributes),
];

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

/**
 * The API: every feature's routes behind the front door. `now` is the clock every route uses
 * (tests inject one); `removedRoutes` the 410 table (tests add entries of their own).
 */
export function createApi(infra: Infrastructure, options: { now?: () => number; removedRoutes?: RemovedRoute[] } = {}): Koa<AppState> {
  const { config, log, metrics, database, temporal, secretKey, lifecycle } = infra;
  const now = options.now ?? (() => Date.now());
  const db = database.db;
  // The benchmark gateway acks without Temporal; only this line can choose it.
  const ingress = config.bench.disableEnqueue
    ? createNoEnqueueGateway()
    : createIngressGateway({
        temporal,
        startTimeoutMs: config.temporal.startTimeoutMs,
        updateTimeoutMs: config.temporal.updateTimeoutMs,
        metrics,
      });

  const identity = createIdentityFeature({ db, log, now });
  const features = [
    identity,
    createRunsFeature({ config, db, temporal, ingress, metrics, now }),
    createSlackFeature({ config, db, secretKey, temporal, ingress, metrics, log, now }),
    createGithubFeature({ config, db, ingress, metrics, now }),
    createMcpFeature({ config, temporal, metrics }),
  ];
  const system = createSystemRoutes({ database, temporal, metrics, lifecycle, openapiDocument: () => openapi.document() });
  const routes = [...system, ...features.flatMap((feature) => feature.routes)];
  const openapi = createOpenApi(routes);
  return createApp({ routes, authenticate: identity.authenticate, log, metrics, removedRoutes: options.removedRoutes ?? REMOVED_ROUTES });
}

/** How often a worker process reconciles runs that ended outside their own logic. */
const RUN_SWEEP_INTERVAL_MS = 60_000;

/** The worker role's periodic sweep of stale run rows (src/runs/reconcile.ts). */
function startRunSweep(infra: Infrastructure): { stop(): void } {
  const timer = setInterval(() => {
    sweepStaleRuns({ config: infra.config, db: infra.database.db, temporal: infra.temporal }, new Date()).then(
      (closed) => closed > 0 && infra.log.warn({ closed }, 'closed the rows of runs that ended outside their own logic'),
      (error: unknown) => infra.log.warn({ err: error }, 'run sweep failed; retrying at the next interval'),
    );
  }, RUN_SWEEP_INTERVAL_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/** What the worker's activities use. `mcpNetwork`: tests inject a resolver that needs no DNS. */
export function activityDeps(infra: Infrastructure, mcpNetwork?: McpNetworkOverrides) {
  return { config: infra.config, db: infra.database.db, log: infra.log, temporal: infra.temporal, secretKey: infra.secretKey, mcpNetwork };
}

export interface RunningService {
  http?: HttpServer;
  worker?: WorkerHandle;
  dependencies: Dependencies;
  infra: Infrastructure;
  stop(): Promise<void>;
}

export async function startService(options: {
  config: Config;
  log: Logger;
  roles: { api: boolean; worker: boolean };
  allowEmbedded: boolean;
}): Promise<RunningService> {
  const { config, log, roles } = options;
  const dependencies = await ensureDependencies(config, log, options.allowEmbedded);
  const embedded = dependencies.embedded.postgres || dependencies.embedded.temporal || config.embeddedAllowed;
  const infra = await createInfrastructure(config, log, { ...dependencies, embedded });
  let worker: WorkerHandle | undefined;
  let sweep: { stop(): void } | undefined;
  let http: HttpServer | undefined;
  try {
    const applied = await migrateToLatest(infra.database.db);
    if (applied.length > 0) log.info({ applied }, 'applied migrations');
    await ensureSearchAttributes(infra.temporal.connection, config.temporal.namespace, SEARCH_ATTRIBUTES, log);
    if (roles.worker) {
      worker = await startWorker({
        config,
        address: dependencies.temporalAddress,
        log,
        deps: activityDeps(infra),
      });
      sweep = startRunSweep(infra);
    }
    if (roles.api) http = await listen(createApi(infra), config.http.host, config.http.port);
  } catch (error) {
    sweep?.stop();
    await worker?.shutdown();
    await infra.temporal.close().catch(() => undefined);
    await infra.database.close().catch(() => undefined);
    await dependencies.stop();
    throw error;
  }

  let stopping: Promise<void> | undefined;
  return {
    http,
    worker,
    dependencies,
    infra,
    // Shutdown order: /ready turns 503 → stop accepting and drain requests → drain the worker
    // → close clients → stop embedded children.
    stop: () =>
      (stopping ??= (async () => {
        infra.lifecycle.shuttingDown = true;
        if (http && config.http.shutdownReadyDelayMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, config.http.shutdownReadyDelayMs));
        }
        await http?.close(config.http.shutdownGraceMs);
        sweep?.stop();
        await worker?.shutdown();
        await infra.temporal.close().catch(() => undefined);
        await infra.database.close().catch(() => undefined);
        await dependencies.stop();
      })()),
  };
}
