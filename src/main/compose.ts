/**
 * The composition root: the one place that decides what exists. It builds the infrastructure
 * (config, logger, metrics, Postgres, the Temporal client, the ingress gateway), then reads every
 * feature's descriptor (src/main/features.ts): routes for the front door; workflows, activities,
 * task queues and sweeps for the worker; search attributes for Temporal.
 *
 * `npm start` runs everything in one process (embedded Temporal and Postgres when their
 * addresses are unset); `npm run serve` and `npm run worker` are the production split and
 * refuse embedded servers unless EMBEDDED=true.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type Koa from 'koa';
import { publicBaseUrl } from '../app/config';
import type { ActivityFunction, ApiDeps, Feature, PlatformSettings, WorkerDeps } from '../app/feature';
import { createApp } from '../app/http/app';
import type { AppState } from '../app/http/context';
import { REMOVED_ROUTES, type RemovedRoute } from '../app/http/deprecated';
import { createOpenApi } from '../app/http/openapi';
import { listen, type HttpServer } from '../app/http/server';
import { createSystemRoutes } from '../app/http/system-routes';
import { createIngressGateway, createNoEnqueueGateway } from '../app/ingress';
import type { Logger } from '../app/log';
import { createMetrics, type Metrics } from '../app/metrics';
import { loadSecretKeys, type SecretKeys } from '../app/secrets';
import { openDatabase, type DbHandle } from '../app/store/db';
import { embeddedPostgresOptions, startEmbeddedPostgres } from '../app/store/embedded-postgres';
import { migrateToLatest } from '../app/store/migrate';
import { createTemporalClient, type TemporalClientHandle } from '../app/temporal/client';
import { devServerDbFile, findTemporalCli, startDevServer } from '../app/temporal/dev-server';
import { ensureSearchAttributes } from '../app/temporal/search-attributes';
import { startWorker, type WorkerHandle } from '../app/temporal/worker';
import type { Config } from './config';
import { features as featureList, type FeatureOptions } from './features';

/** The descriptors as the root uses them: each part receives its own feature's settings. */
function features(options: FeatureOptions = {}): readonly Feature[] {
  return featureList(options);
}

/** Every feature's custom search attributes, registered on the dev server and at start-up. */
export const SEARCH_ATTRIBUTES = features().flatMap((feature) => feature.searchAttributes ?? []);

/** Every feature's workflow module, bundled for the worker. */
export const WORKFLOW_MODULES = features().flatMap((feature) => (feature.workflows ? [feature.workflows] : []));

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

/** The platform's values a feature may read besides its own settings. */
function platformSettings(config: Config): PlatformSettings {
  return {
    publicBaseUrl: publicBaseUrl(config),
    taskQueue: config.temporal.taskQueue,
    temporalCallTimeoutMs: config.temporal.startTimeoutMs,
    failureLimits: config.failureLimits,
  };
}

/**
 * The API: every feature's routes behind the front door. `now` is the clock every route uses
 * (tests inject one); `removedRoutes` the 410 table (tests add entries of their own).
 */
export function createApi(infra: Infrastructure, options: { now?: () => number; removedRoutes?: RemovedRoute[] } = {}): Koa<AppState> {
  const { config, log, metrics, database, temporal, secretKey, lifecycle } = infra;
  // The benchmark gateway acks without Temporal; only this line can choose it.
  const ingress = config.bench.disableEnqueue
    ? createNoEnqueueGateway()
    : createIngressGateway({
        temporal,
        startTimeoutMs: config.temporal.startTimeoutMs,
        updateTimeoutMs: config.temporal.updateTimeoutMs,
        metrics,
      });
  const deps = (feature: Feature): ApiDeps<unknown> => ({
    settings: settingsOf(config, feature),
    platform: platformSettings(config),
    db: database.db,
    log,
    metrics,
    temporal,
    ingress,
    secretKey,
    now: options.now ?? (() => Date.now()),
  });
  const all = features();
  const authenticators = all.flatMap((feature) => (feature.authenticator ? [feature.authenticator(deps(feature))] : []));
  if (authenticators.length !== 1) throw new Error(`exactly one feature must authenticate requests, found ${authenticators.length}`);
  const system = createSystemRoutes({ database, temporal, metrics, lifecycle, openapiDocument: () => openapi.document() });
  const routes = [...system, ...all.flatMap((feature) => feature.routes?.(deps(feature)) ?? [])];
  const openapi = createOpenApi(routes);
  return createApp({ routes, authenticate: authenticators[0]!, log, metrics, removedRoutes: options.removedRoutes ?? REMOVED_ROUTES });
}

/** A feature's own settings, as the configuration parsed them. */
function settingsOf(config: Config, feature: Feature): unknown {
  return (config as unknown as Record<string, unknown>)[feature.name];
}

/** What a worker process hands each feature. */
function workerDeps(infra: Infrastructure, feature: Feature): WorkerDeps<unknown> {
  return {
    settings: settingsOf(infra.config, feature),
    platform: platformSettings(infra.config),
    db: infra.database.db,
    log: infra.log,
    temporal: infra.temporal,
    secretKey: infra.secretKey,
  };
}

/** Every feature's activities, keyed by the name workflows proxy them by. */
function workerActivities(infra: Infrastructure, options: FeatureOptions = {}): Record<string, ActivityFunction> {
  const activities: Record<string, ActivityFunction> = {};
  for (const feature of features(options)) {
    for (const [name, activity] of Object.entries(feature.activities?.(workerDeps(infra, feature)) ?? {})) {
      if (name in activities) throw new Error(`activity ${name} is registered by two features`);
      activities[name] = activity;
    }
  }
  return activities;
}

/** Starts a worker for every feature's workflows, activities and task queues. */
export function startFeatureWorker(infra: Infrastructure, options: FeatureOptions & { address: string; taskQueue?: string }) {
  const all = features(options);
  return startWorker({
    config: infra.config,
    address: options.address,
    log: infra.log,
    taskQueue: options.taskQueue,
    activities: workerActivities(infra, options),
    workflowModules: WORKFLOW_MODULES,
    extraTaskQueues: (mainQueue) => all.flatMap((feature) => feature.taskQueues?.(mainQueue) ?? []),
  });
}

/** The worker role's periodic jobs, each feature's, on their own intervals. */
function startSweeps(infra: Infrastructure): { stop(): void } {
  const timers = features().flatMap((feature) =>
    (feature.sweeps ?? []).map((sweep) => {
      const timer = setInterval(() => {
        sweep
          .run(workerDeps(infra, feature), new Date())
          .catch((error: unknown) => infra.log.warn({ err: error, sweep: sweep.name }, 'sweep failed; retrying at the next interval'));
      }, sweep.intervalMs);
      timer.unref();
      return timer;
    }),
  );
  return { stop: () => timers.forEach((timer) => clearInterval(timer)) };
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
      worker = await startFeatureWorker(infra, { address: dependencies.temporalAddress });
      sweep = startSweeps(infra);
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
