/** GET /v1/connectors/github/targets: the organization's targets, oldest first (admins only). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { authResponses } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { viewTarget } from '../target-views';
import { listTargets } from '../targets';
import type { GithubRouteDeps } from './shared';
import { TAGS, TargetBody } from './target-shared';

async function getTargets(deps: Pick<GithubRouteDeps, 'db' | 'settings'>, principal: Principal): Promise<Reply> {
  const targets = await listTargets(deps.db, principal.organizationId);
  const views = await Promise.all(
    targets.map((t) => viewTarget(deps.db, principal.organizationId, t.targetId, deps.settings.app !== undefined)),
  );
  return { status: 200, body: { targets: views.filter((v) => v !== undefined) } };
}

export function createListTargetsRoute(deps: Pick<GithubRouteDeps, 'db' | 'settings'>): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/connectors/github/targets',
    summary: "The organization's GitHub targets, oldest first (admins only)",
    tags: TAGS,
    auth: 'admin',
    responses: {
      200: { description: 'Targets with where their sync stands.', schema: z.object({ targets: z.array(TargetBody) }) },
      ...authResponses,
    },
    handler: ({ principal }) => getTargets(deps, principal),
  });
}
