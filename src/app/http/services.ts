import type { Config } from '../config';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import type { DbHandle } from '../store/db';
import type { TemporalClientHandle } from '../temporal/client';

/** What route handlers may use. Built once per API process; one per app instance in tests. */
export interface Services {
  config: Config;
  log: Logger;
  metrics: Metrics;
  database: DbHandle;
  temporal: TemporalClientHandle;
  /** Key for secrets at rest and signed tokens (32 bytes). */
  secretKey: Buffer;
  /** Injectable clock (ms since epoch), so time-dependent checks are testable. */
  now: () => number;
  /** Set when shutdown begins: /ready answers 503 from then on. */
  lifecycle: { shuttingDown: boolean };
}
