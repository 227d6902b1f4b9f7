/** GET /v1/connectors/github/targets: the organization's targets, oldest first (admins only). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import { viewTarget } from '../target-views';
import { listTargets } from '../target-records';
import type { GithubRouteDeps } from './shared';
import { adminOrNotFound, TAGS, TargetBody, targetAuthResponses } from './target-shared';

async function getTargets(deps: Pick<GithubRouteDeps, 'db' | 'settings' | 'now'>, principal: Principal): Promise<Reply> {
  const targets = await listTargets(deps.db, principal.organizationId);
  const views = await Promise.all(
    targets.map((t) =>
      viewTarget(deps.db, {
        organizationId: principal.organizationId,
        targetId: t.targetId,
        configured: deps.settings.app !== undefined,
        now: deps.now(),
      }),
    ),
  );
  return { status: 200, body: { targets: views.filter((v) => v !== undefined) } };
}

export function createListTargetsRoute(deps: Pick<GithubRouteDeps, 'db' | 'settings' | 'now'>): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/connectors/github/targets',
    summary: "The organization's GitHub targets, oldest first (admins only)",
    tags: TAGS,
    auth: 'authenticated',
    responses: {
      200: { description: 'Targets with where their sync stands.', schema: z.object({ targets: z.array(TargetBody) }) },
      ...targetAuthResponses,
    },
    handler: ({ principal }) => getTargets(deps, adminOrNotFound(principal)),
  });
}
