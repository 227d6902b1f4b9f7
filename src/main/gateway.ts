/**
 * The ingress gateway as each kind of process builds it. Every process's starts carry their
 * organization's fairness key and weight (TEMPORAL_FAIRNESS; weights from Postgres, set with
 * `den fairness-weight`). Only the API admits (src/main/api.ts); the worker's activities and
 * `den` hand over work that was admitted at the front door already, or that an operator asked for.
 */
import { admitAll } from '../app/admission';
import type { PlatformConfig } from '../app/config';
import { createIngressGateway, type IngressGateway } from '../app/ingress';
import type { Logger } from '../app/log';
import type { Metrics } from '../app/metrics';
import type { Db } from '../app/store/db';
import type { TemporalClientHandle } from '../app/temporal/client';
import { createFairness, type Fairness } from '../app/temporal/fairness';
import { fairnessWeight } from '../identity';

export function processFairness(deps: { db: Db; log: Logger; config: PlatformConfig }): Fairness {
  return createFairness({
    enabled: deps.config.temporal.fairness,
    cacheTtlMs: deps.config.temporal.fairnessWeightTtlMs,
    loadWeight: (organizationId) => fairnessWeight(deps.db, organizationId),
    log: deps.log,
  });
}

/** The gateway of a process that admits nothing itself: the worker, and `den`. */
export function unadmittedGateway(deps: {
  temporal: TemporalClientHandle;
  db: Db;
  log: Logger;
  config: PlatformConfig;
  metrics?: Metrics;
}): IngressGateway {
  return createIngressGateway({
    temporal: deps.temporal,
    startTimeoutMs: deps.config.temporal.startTimeoutMs,
    updateTimeoutMs: deps.config.temporal.updateTimeoutMs,
    fairness: processFairness(deps),
    admission: admitAll,
    metrics: deps.metrics,
  });
}
