/**
 * POST /v1/connectors/github/installations/install-url (admins): GitHub's page that installs the
 * App, with a state bound to the organization and the admin, single-use and valid for ten minutes.
 * GitHub hands the state back to the setup route (src/github/routes/setup.ts) with the installer's code.
 */
import { errors } from '../../app/errors';
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { authResponses } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { issueFlowState } from '../../app/install-flow';
import { INSTALL_FLOW, appInstallUrl } from '../oauth';
import type { GithubRouteDeps } from './shared';
import { NOT_CONFIGURED_MESSAGE, NotConfigured } from './installation-shared';

type Deps = Pick<GithubRouteDeps, 'db' | 'settings' | 'secretKey' | 'now'>;

const InstallUrl = z
  .object({
    url: z.string().openapi({ example: 'https://github.com/apps/den-sync/installations/new?state=…' }),
    expiresAt: z.string().openapi({ description: 'When the link’s state expires (ten minutes); it works once.' }),
  })
  .openapi('GithubInstallUrl');

async function postInstallUrl(deps: Deps, principal: Principal): Promise<Reply> {
  const install = deps.settings.install;
  if (!install) throw errors.conflict('not_configured', { message: NOT_CONFIGURED_MESSAGE });
  const { state, expiresAt } = await issueFlowState(deps, {
    purpose: INSTALL_FLOW.purpose,
    organizationId: principal.organizationId,
    memberId: principal.memberId,
    ttlMs: INSTALL_FLOW.ttlMs,
  });
  return {
    status: 200,
    body: { url: appInstallUrl(install.webBaseUrl, install.slug, state), expiresAt: new Date(expiresAt).toISOString() },
  };
}

export function createInstallUrlRoute(deps: Deps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/connectors/github/installations/install-url',
    summary: "A link to install the GitHub App for the caller's organization (admins only)",
    description:
      'Open the link in a browser signed in to GitHub: GitHub installs the App, asks the installer to authorize it, and ' +
      'sends them to the setup route (`GET /v1/connectors/github/setup`), which binds the installation to this ' +
      'organization once GitHub lists it for that installer.',
    tags: ['Connectors'],
    auth: 'admin',
    responses: {
      200: { description: 'The install link.', schema: InstallUrl },
      409: {
        description: '`not_configured`: GITHUB_APP_SLUG, GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET are not set.',
        schema: NotConfigured,
      },
      ...authResponses,
    },
    handler: ({ principal }) => postInstallUrl(deps, principal),
  });
}
