/** What more than one Slack route uses: the deps type, the path parameters and the plain ack. */
import type { ApiDeps } from '../../app/feature';
import { z } from '../../app/http/zod';
import { CONNECTION_ID_PATTERN } from '../connections';
import type { SlackQuota } from '../quota';
import type { SlackSettings } from '../settings';
import type { SlackVerifier } from '../verify';
import type { ThreadRouter } from '../thread-routing';

/** What the Slack routes use: the feature's deps from the composition root (src/main/api.ts), and what its descriptor builds. */
export type SlackRouteDeps = ApiDeps<SlackSettings> & {
  /** Shared by every replica (Postgres); built by the feature's descriptor. */
  quota: SlackQuota;
  /** This process's verification of signed requests, with its caches; built by the feature's descriptor. */
  verifier: SlackVerifier;
  /** This process's routing of channel messages and surface events, with its cache of answered threads. */
  threads: ThreadRouter;
};

export const ConnectionParams = z.object({
  connectionId: z
    .string()
    .length(30)
    .regex(CONNECTION_ID_PATTERN, 'Must be a typeid with prefix emc (emc_ followed by 26 base32 characters).')
    .openapi({ description: 'Slack connection id (spec 2.1).', example: 'emc_01h2xcejqtf2nbrexx3vqjhp41' }),
});

export const ok = () => ({ status: 200, body: { ok: true } });
