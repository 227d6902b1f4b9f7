import type { Config } from '../app/config';
import type { IngressGateway } from '../app/ingress';
import type { Metrics } from '../app/metrics';
import type { Db } from '../app/store/db';
import type { TemporalClientHandle } from '../app/temporal/client';

/** What the run routes use, passed in by the composition root (src/main/compose.ts). */
export interface RunDeps {
  config: Config;
  db: Db;
  temporal: TemporalClientHandle;
  ingress: IngressGateway;
  metrics: Metrics;
  now: () => number;
}
