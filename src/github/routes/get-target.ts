/** GET /v1/connectors/github/targets/{targetId}: a target and where its sync stands (admins only; another organization's is a 404). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError } from '../../app/http/schemas';
import type { GithubRouteDeps } from './shared';
import { adminOrNotFound, TAGS, TargetBody, TargetIdParams, targetNotFound, targetAuthResponses } from './target-shared';
import { viewTarget } from '../target-views';

type Deps = Pick<GithubRouteDeps, 'db' | 'settings' | 'ingress' | 'now'>;
const badId = { 400: { description: 'Invalid target id.', schema: InvalidRequestError } };

async function getOne(deps: Deps, principal: Principal, targetId: string): Promise<Reply> {
  const view = await viewTarget(deps.db, {
    organizationId: principal.organizationId,
    targetId,
    configured: deps.settings.app !== undefined,
    now: deps.now(),
  });
  if (!view) throw targetNotFound();
  return { status: 200, body: view };
}

export function createGetTargetRoute(deps: Deps): Route {
  return defineRoute({
    tags: TAGS,
    auth: 'authenticated',
    params: TargetIdParams,
    method: 'get',
    path: '/v1/connectors/github/targets/{targetId}',
    summary: 'A GitHub target and where its sync stands (admins only)',
    responses: { 200: { description: 'The target.', schema: TargetBody }, ...badId, ...targetAuthResponses },
    handler: ({ principal, params }) => getOne(deps, adminOrNotFound(principal), params.targetId),
  });
}
