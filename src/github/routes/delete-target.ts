/** DELETE /v1/connectors/github/targets/{targetId}: the target and its snapshot (admins only). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError } from '../../app/http/schemas';
import type { GithubRouteDeps } from './shared';
import { adminOrNotFound, TAGS, TargetIdParams, targetNotFound, targetAuthResponses } from './target-shared';
import { deleteTarget } from '../target-records';

type Deps = Pick<GithubRouteDeps, 'db' | 'settings' | 'ingress'>;
const badId = { 400: { description: 'Invalid target id.', schema: InvalidRequestError } };

async function deleteOne(deps: Deps, principal: Principal, targetId: string): Promise<Reply> {
  if (!(await deleteTarget(deps.db, principal.organizationId, targetId))) throw targetNotFound();
  return { status: 204 };
}

export function createDeleteTargetRoute(deps: Deps): Route {
  return defineRoute({
    tags: TAGS,
    auth: 'authenticated',
    params: TargetIdParams,
    method: 'delete',
    path: '/v1/connectors/github/targets/{targetId}',
    summary: 'Delete a target and its snapshot (admins only)',
    responses: { 204: { description: 'Deleted.' }, ...badId, ...targetAuthResponses },
    handler: ({ principal, params }) => deleteOne(deps, adminOrNotFound(principal), params.targetId),
  });
}
