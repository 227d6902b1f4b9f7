/** What the GitHub routes share: the deps interface. */
import type { Config } from '../../app/config';
import type { IngressGateway } from '../../app/ingress';
import type { Metrics } from '../../app/metrics';
import type { Db } from '../../app/store/db';

/** What the GitHub routes use, passed in by the composition root (src/app/compose.ts). */
export interface GithubRouteDeps {
  config: Config;
  db: Db;
  ingress: IngressGateway;
  metrics: Metrics;
  now: () => number;
}
