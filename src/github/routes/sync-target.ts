/** POST /v1/connectors/github/targets/{targetId}/sync: force a full resync (admins only). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError } from '../../app/http/schemas';
import type { GithubRouteDeps } from './shared';
import { adminOrNotFound, TAGS, TargetIdParams, targetNotFound, targetAuthResponses } from './target-shared';
import { signalTarget } from '../target-signal';
import { errors } from '../../app/errors';
import { z } from '../../app/http/zod';
import { findTarget, recordResync } from '../target-records';

type Deps = Pick<GithubRouteDeps, 'db' | 'settings' | 'ingress'>;
const badId = { 400: { description: 'Invalid target id.', schema: InvalidRequestError } };

/** Records a full resync and hands it to the target's workflow: 202 once Temporal holds it. */
async function postSync(deps: Deps, principal: Principal, targetId: string): Promise<Reply> {
  const target = await findTarget(deps.db, principal.organizationId, targetId);
  if (!target) throw targetNotFound();
  if (!deps.settings.app) throw errors.conflict('github_app_not_configured', { message: 'GITHUB_APP_ID and a private key are not set.' });
  if (target.status !== 'active') throw errors.conflict('target_inactive', { message: `The target is ${target.status}.` });
  const eventId = await recordResync(deps.db, { target, reason: 'manual' });
  // An operator's forced sync waits for its organization's admission rather than being shed.
  await signalTarget(deps.ingress, { target, signal: { eventId, full: true }, idleMs: deps.settings.sync.idleMs, admission: 'wait' });
  return { status: 202, body: { eventId } };
}

export function createSyncTargetRoute(deps: Deps): Route {
  return defineRoute({
    tags: TAGS,
    auth: 'authenticated',
    params: TargetIdParams,
    method: 'post',
    path: '/v1/connectors/github/targets/{targetId}/sync',
    summary: 'Force a full resync of a target (admins only)',
    responses: {
      202: { description: 'Recorded and handed to the target’s workflow.', schema: z.object({ eventId: z.string() }) },
      409: {
        description: 'App credentials not configured, or the target is not active.',
        schema: z.object({ error: z.string(), message: z.string() }),
      },
      ...badId,

      ...targetAuthResponses,
    },
    handler: ({ principal, params }) => postSync(deps, adminOrNotFound(principal), params.targetId),
  });
}
