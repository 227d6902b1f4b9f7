/** DELETE /v1/connectors/github/targets/{targetId}: the target and its snapshot (admins only). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, authResponses } from '../../app/http/schemas';
import type { GithubRouteDeps } from './shared';
import { NotFoundError, TAGS, TargetIdParams, targetNotFound } from './target-shared';
import { deleteTarget } from '../target-views';

type Deps = Pick<GithubRouteDeps, 'db' | 'settings' | 'ingress'>;
const notFound = { 404: { description: 'No such target in this organization.', schema: NotFoundError } };
const badId = { 400: { description: 'Invalid target id.', schema: InvalidRequestError } };

async function deleteOne(deps: Deps, principal: Principal, targetId: string): Promise<Reply> {
  if (!(await deleteTarget(deps.db, principal.organizationId, targetId))) throw targetNotFound();
  return { status: 204 };
}

export function createDeleteTargetRoute(deps: Deps): Route {
  return defineRoute({
    tags: TAGS,
    auth: 'admin',
    params: TargetIdParams,
    method: 'delete',
    path: '/v1/connectors/github/targets/{targetId}',
    summary: 'Delete a target and its snapshot (admins only)',
    responses: { 204: { description: 'Deleted.' }, ...badId, ...notFound, ...authResponses },
    handler: ({ principal, params }) => deleteOne(deps, principal, params.targetId),
  });
}
