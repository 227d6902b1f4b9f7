/** What more than one Slack route uses: the deps interface, the path parameters and the plain ack. */
import type { Config } from '../../app/config';
import type { IngressGateway } from '../../app/ingress';
import type { Logger } from '../../app/log';
import type { Metrics } from '../../app/metrics';
import type { SecretKeys } from '../../app/secrets';
import type { Db } from '../../app/store/db';
import type { TemporalClientHandle } from '../../app/temporal/client';
import { z } from '../../app/http/zod';
import { CONNECTION_ID_PATTERN } from '../connections';
import type { SlackQuota } from '../quota';

/** What the Slack routes use, passed in by the composition root (src/app/compose.ts). */
export interface SlackRouteDeps {
  config: Config;
  db: Db;
  secretKey: SecretKeys;
  temporal: TemporalClientHandle;
  ingress: IngressGateway;
  metrics: Metrics;
  log: Logger;
  now: () => number;
  /** Shared by every replica (Postgres); built by the feature factory. */
  quota: SlackQuota;
}

export const ConnectionParams = z.object({
  connectionId: z
    .string()
    .length(30)
    .regex(CONNECTION_ID_PATTERN, 'Must be a typeid with prefix emc (emc_ followed by 26 base32 characters).')
    .openapi({ description: 'Slack connection id (spec 2.1).', example: 'emc_01h2xcejqtf2nbrexx3vqjhp41' }),
});

export const ok = () => ({ status: 200, body: { ok: true } });
