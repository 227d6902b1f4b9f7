/**
 * POST /v1/connectors/github/targets: connect a repository of an App installation (admins only;
 * idempotent). Only on an installation the organization owns: any other is answered like a
 * missing one (404). With App credentials the installation must reach the repository (else 422).
 */
import { AppError, errors } from '../../app/errors';
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { connectTarget, type ConnectOutcome } from '../connect';
import { viewTarget } from '../target-views';
import { REPOSITORY_FULL_NAME } from '../target-records';
import type { GithubRouteDeps } from './shared';
import { adminOrNotFound, TAGS, TargetBody, targetAuthResponses } from './target-shared';

type Deps = Pick<GithubRouteDeps, 'db' | 'settings' | 'api' | 'now'>;

const ErrorBody = z.object({ error: z.string(), message: z.string() });

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

/** A refused connection as the route answers it. */
function refusal(outcome: Exclude<ConnectOutcome, { ok: true }>): AppError {
  switch (outcome.reason) {
    case 'organization_not_found':
    case 'installation_not_owned':
      return errors.notFound('No such installation in this organization.');
    case 'repository_not_accessible':
      return new AppError('repository_not_accessible', 422, {
        body: {
          error: 'repository_not_accessible',
          message: 'The installation cannot read this repository: add it to the installation on GitHub, or check its name.',
        },
      });
    case 'github_unavailable':
      return new AppError('github_unavailable', 502, {
        body: { error: 'github_unavailable', message: `GitHub did not answer the repository check: ${outcome.message}` },
      });
  }
}

async function postTarget(deps: Deps, principal: Principal, body: z.output<typeof CreateTargetBody>): Promise<Reply> {
  const connected = await connectTarget(deps, {
    organizationId: principal.organizationId,
    installationId: body.installationId,
    repositoryFullName: body.repository,
    ref: body.ref,
  });
  if (!connected.ok) throw refusal(connected);
  const view = await viewTarget(deps.db, {
    organizationId: principal.organizationId,
    targetId: connected.targetId,
    configured: deps.settings.app !== undefined,
    now: deps.now(),
  });
  return { status: connected.created ? 201 : 200, body: view };
}

export function createCreateTargetRoute(deps: Deps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/connectors/github/targets',
    summary: 'Connect a repository of a GitHub App installation (admins only; idempotent)',
    description:
      'The same organization, installation, repository and ref give the same target (200); a new one is 201. ' +
      'The installation must be bound to the organization (the install flow or `den github installations bind`); ' +
      'any other installation is answered 404, like a missing one. With App credentials the installation’s token must ' +
      'read the repository (`GET /repos/{owner}/{repo}`), else 422; without them the target is recorded unverified and ' +
      'its first sync checks it.',
    tags: TAGS,
    auth: 'authenticated',
    body: { kind: 'json', schema: CreateTargetBody, limitBytes: 16 * 1024 },
    responses: {
      200: { description: 'The identical target that already existed.', schema: TargetBody },
      201: { description: 'The target, created.', schema: TargetBody },
      400: { description: 'Invalid body.', schema: InvalidRequestError },
      ...targetAuthResponses,
      404: {
        description: 'No such installation in this organization (bound to another, or to none), or the caller is not an admin.',
        schema: targetAuthResponses[404].schema,
      },
      422: {
        description: '`repository_not_accessible`: the installation cannot read the repository (App credentials set).',
        schema: ErrorBody,
      },
      502: { description: '`github_unavailable`: GitHub did not answer the repository check; retry later.', schema: ErrorBody },
    },
    handler: ({ principal, body }) => postTarget(deps, adminOrNotFound(principal), body),
  });
}
