/** The API process's front door: the system routes and every feature's, behind one Koa app. */
import type Koa from 'koa';
import type { ApiDeps, Feature } from '../app/feature';
import { createApp } from '../app/http/app';
import type { AppState } from '../app/http/context';
import { REMOVED_ROUTES, type RemovedRoute } from '../app/http/deprecated';
import { createOpenApi } from '../app/http/openapi';
import { createSystemRoutes } from '../app/http/system-routes';
import { AdmissionControl } from '../app/admission';
import { createDelayReader } from '../app/engine-delay';
import { createIngressGateway, createNoEnqueueGateway } from '../app/ingress';
import { createNotices } from '../app/notices';
import { FEATURES, taskQueuesOf } from './features';
import { processFairness } from './gateway';
import { platformValues, settingsOf, type Infrastructure } from './infrastructure';

/**
 * The API: every feature's routes behind the front door. `now` is the clock every route uses
 * (tests inject one); `removedRoutes` the 410 table (tests add entries of their own).
 */
export function createApi(infra: Infrastructure, options: { now?: () => number; removedRoutes?: RemovedRoute[] } = {}): Koa<AppState> {
  const { config, log, metrics, database, temporal, secretKey, lifecycle } = infra;
  const fairness = processFairness({ db: database.db, log, config });
  const engineDelay = createDelayReader({
    db: database.db,
    taskQueues: taskQueuesOf(config.temporal.taskQueue),
    intervalMs: config.engineDelay.intervalMs,
    log,
  });
  const admission = new AdmissionControl({
    db: database.db,
    log,
    metrics,
    settings: config.admission,
    weightOf: fairness.weight,
    engineDelay: { intervalMs: config.engineDelay.intervalMs, ...engineDelay },
    now: options.now,
  });
  const gateway = createIngressGateway({
    temporal,
    startTimeoutMs: config.temporal.startTimeoutMs,
    updateTimeoutMs: config.temporal.updateTimeoutMs,
    metrics,
    fairness,
    admission,
  });
  // The benchmark gateway acks without Temporal; only this line can choose it.
  const ingress = config.bench.disableEnqueue ? createNoEnqueueGateway(gateway) : gateway;
  const notices = createNotices();
  const deps = (feature: Feature): ApiDeps<unknown> => ({
    settings: settingsOf(config, feature),
    platform: platformValues(config),
    db: database.db,
    channels: database.channels,
    log,
    metrics,
    ingress,
    notices,
    secretKey,
    now: options.now ?? (() => Date.now()),
  });
  const all = FEATURES;
  const authenticators = all.flatMap((feature) => (feature.authenticator ? [feature.authenticator(deps(feature))] : []));
  if (authenticators.length !== 1) throw new Error(`exactly one feature must authenticate requests, found ${authenticators.length}`);
  const system = createSystemRoutes({ database, temporal, metrics, lifecycle, openapiDocument: () => openapi.document() });
  const routes = [...system, ...all.flatMap((feature) => feature.routes?.(deps(feature)) ?? [])];
  const openapi = createOpenApi(routes);
  return createApp({
    routes,
    authenticate: authenticators[0]!,
    log,
    metrics,
    removedRoutes: options.removedRoutes ?? REMOVED_ROUTES,
    unauthenticatedBodies: config.http.unauthenticatedBodies,
    trustedProxies: config.http.trustedProxies,
    refusalHoldMs: config.admission.refusalHoldMs,
  });
}
