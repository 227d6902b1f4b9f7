/**
 * The composition root: the one place that decides what exists. It builds the infrastructure
 * (config, logger, metrics, Postgres, the Temporal client, the ingress gateway), then reads every
 * feature's descriptor (src/main/features.ts): routes for the front door; workflows, activities,
 * task queues, sweeps and schedules for the worker; search attributes for Temporal.
 *
 * `npm start` runs everything in one process (embedded Temporal and Postgres when their
 * addresses are unset); `npm run serve` and `npm run worker` are the production split and
 * refuse embedded servers unless EMBEDDED=true.
 */
import { listen, type HttpServer } from '../app/http/server';
import type { Logger } from '../app/log';
import { migrateToLatest } from '../app/store/migrate';
import { ensureSearchAttributes } from '../app/temporal/search-attributes';
import type { WorkerHandle } from '../app/temporal/worker';
import { createApi } from './api';
import type { Config } from './config';
import { SEARCH_ATTRIBUTES } from './features';
import { createInfrastructure, ensureDependencies, type Dependencies, type Infrastructure } from './infrastructure';
import { ensureFeatureSchedules, startFeatureWorker, startSweeps } from './worker';

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
    await ensureSearchAttributes({ connection: infra.temporal.connection, namespace: config.temporal.namespace }, SEARCH_ATTRIBUTES, log);
    if (roles.worker) {
      worker = await startFeatureWorker(infra, { address: dependencies.temporalAddress });
      sweep = startSweeps(infra);
      await ensureFeatureSchedules(infra);
    }
    if (roles.api) http = await listen(createApi(infra), config.http);
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
