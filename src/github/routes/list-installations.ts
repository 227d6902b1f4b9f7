/** GET /v1/connectors/github/installations: the App installations the caller's organization owns (admins only). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { authResponses } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { listInstallations } from '../installations';
import type { GithubRouteDeps } from './shared';

const Installation = z
  .object({
    installationId: z.number().int(),
    account: z.string().nullable().openapi({ description: 'The GitHub account the App is installed on, when the install flow learnt it.' }),
    boundVia: z.enum(['migration', 'operator', 'install_flow']),
    boundAt: z.string(),
    targets: z.number().int().openapi({ description: "The organization's targets on the installation." }),
  })
  .openapi('GithubInstallation');

async function getInstallations(deps: Pick<GithubRouteDeps, 'db'>, principal: Principal): Promise<Reply> {
  const owned = await listInstallations(deps.db, principal.organizationId);
  const installations = owned.map(({ installationId, account, boundVia, boundAt, targets }) => ({
    installationId,
    account,
    boundVia,
    boundAt,
    targets,
  }));
  return { status: 200, body: { installations } };
}

export function createListInstallationsRoute(deps: Pick<GithubRouteDeps, 'db'>): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/connectors/github/installations',
    summary: 'The GitHub App installations the organization owns, oldest binding first (admins only)',
    tags: ['Connectors'],
    auth: 'admin',
    responses: {
      200: { description: 'Installations bound to the organization.', schema: z.object({ installations: z.array(Installation) }) },
      ...authResponses,
    },
    handler: ({ principal }) => getInstallations(deps, principal),
  });
}
