/** POST /v1/connectors/github/targets: connect a repository of an App installation (admins only; idempotent). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { viewTarget } from '../target-views';
import { REPOSITORY_FULL_NAME, createTarget } from '../targets';
import type { GithubRouteDeps } from './shared';
import { adminOrNotFound, TAGS, TargetBody, targetAuthResponses } from './target-shared';

const CreateTargetBody = z.object({
  installationId: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  repository: z.string().regex(REPOSITORY_FULL_NAME, 'must be owner/name'),
  ref: z
    .string()
    .min(1)
    .max(255)
    .regex(/^\S+$/, 'must be a ref such as refs/heads/main or main')
    .optional()
    .openapi({ description: 'Only this ref; a bare name is a branch (`main` → `refs/heads/main`).' }),
});

async function postTarget(
  deps: Pick<GithubRouteDeps, 'db' | 'settings'>,
  principal: Principal,
  body: z.output<typeof CreateTargetBody>,
): Promise<Reply> {
  const created = await createTarget(deps.db, {
    organizationId: principal.organizationId,
    installationId: body.installationId,
    repositoryFullName: body.repository,
    ref: body.ref,
  });
  const view = await viewTarget(deps.db, principal.organizationId, created!.targetId, deps.settings.app !== undefined);
  return { status: created!.created ? 201 : 200, body: view };
}

export function createCreateTargetRoute(deps: Pick<GithubRouteDeps, 'db' | 'settings'>): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/connectors/github/targets',
    summary: 'Connect a repository of a GitHub App installation (admins only; idempotent)',
    description: 'The same organization, installation, repository and ref give the same target (200); a new one is 201.',
    tags: TAGS,
    auth: 'authenticated',
    body: { kind: 'json', schema: CreateTargetBody, limitBytes: 16 * 1024 },
    responses: {
      200: { description: 'The identical target that already existed.', schema: TargetBody },
      201: { description: 'The target, created.', schema: TargetBody },
      400: { description: 'Invalid body.', schema: InvalidRequestError },
      ...targetAuthResponses,
    },
    handler: ({ principal, body }) => postTarget(deps, adminOrNotFound(principal), body),
  });
}
