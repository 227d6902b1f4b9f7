/**
 * GET /v1/connectors/github/setup: the App's Callback URL. With *Request user authorization
 * (OAuth) during installation* on, GitHub sends the installer here with `code`,
 * `installation_id`, `setup_action` and the state of the install link
 * (src/github/routes/install-url.ts).
 *
 * GitHub warns that `installation_id` on this address can be spoofed, so it is trusted only when
 * GitHub itself lists it for the installer: the state is consumed (signature, purpose, expiry,
 * single use), its admin must still be an admin of its organization, the code is exchanged for
 * the installer's user token, and `GET /user/installations` with that token must list the
 * installation. Only then is it bound, and never away from an organization that owns it already.
 *
 * Every answer is a short HTML page (src/app/install-flow.ts), whatever went wrong: the query
 * schema accepts anything a query string can hold, so no input is refused before the handler.
 */
import { AppError } from '../../app/errors';
import { isAdmin } from '../../app/http/auth';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import { FLOW_STATE_REFUSALS, consumeFlowState, flowPage, type FlowStateClaims } from '../../app/install-flow';
import { liveMember } from '../../identity';
import { bindInstallation } from '../installations';
import { INSTALL_FLOW, type InstallerClient } from '../oauth';
import type { GithubRouteDeps } from './shared';

type Deps = Pick<GithubRouteDeps, 'db' | 'settings' | 'secretKey' | 'now' | 'installer'>;

/** A query value as Koa parses it: one string, or several when the name repeats. */
const QueryValue = z.union([z.string(), z.array(z.string())]).optional();

const SetupQuery = z.object({
  code: QueryValue.openapi({ description: "The installer's OAuth code, exchanged for a user token once." }),
  installation_id: QueryValue.openapi({
    description: 'The installation GitHub says was installed: trusted only if GitHub lists it for the installer.',
  }),
  setup_action: QueryValue.openapi({ description: '`install`, `update` or `request` (an owner must approve the installation).' }),
  state: QueryValue.openapi({ description: 'The state of the install link.' }),
});

const HtmlPage = z.string().openapi({ description: 'A short HTML page saying what happened.' });
const html = (description: string) => ({ description, schema: HtmlPage, contentType: 'text/html' });

const START_AGAIN = 'Ask an admin of your organization for a new install link and start again.';
const INSTALLATION_ID = /^[1-9][0-9]{0,15}$/;
const CODE = /^[\x21-\x7e]{1,512}$/;

type Callback =
  | { ok: true; action: 'install' | 'update'; code: string; installationId: number; state: string }
  | { ok: true; action: 'request' }
  | { ok: false; message: string };

const single = (value: string | string[] | undefined): string | undefined => (typeof value === 'string' ? value : undefined);

/** The callback's parameters, each present once and well-formed, or why not. */
function readCallback(query: z.output<typeof SetupQuery>): Callback {
  const [code, installationId, action, state] = [query.code, query.installation_id, query.setup_action, query.state].map(single);
  if (action === 'request') return { ok: true, action };
  if (action !== 'install' && action !== 'update') return { ok: false, message: 'GitHub did not say the App was installed.' };
  if (state === undefined) return { ok: false, message: `This address completes an install link of this service. ${START_AGAIN}` };
  if (code === undefined || !CODE.test(code))
    return {
      ok: false,
      message: 'GitHub sent no authorization code: the App must request user authorization (OAuth) during installation.',
    };
  if (installationId === undefined || !INSTALLATION_ID.test(installationId) || !Number.isSafeInteger(Number(installationId))) {
    return { ok: false, message: 'GitHub sent no valid installation id.' };
  }
  return { ok: true, action, code, installationId: Number(installationId), state };
}

/** Whether the admin who asked for the link is still an admin of its organization. */
async function stillAdmin(deps: Deps, claims: FlowStateClaims): Promise<boolean> {
  const member = await liveMember(deps.db, claims.memberId).catch(() => undefined);
  return member !== undefined && member.organization_id === claims.organizationId && isAdmin(member.role);
}

/** A page saying the installation was not connected, with the coded reason and the installation when known. */
function refused(status: number, why: { reason: string; message: string; installationId?: number }): Reply {
  const { reason, message, installationId } = why;
  const facts: [string, string][] = [['Reason', reason]];
  if (installationId !== undefined) facts.push(['Installation', String(installationId)]);
  return flowPage({ status, title: 'The GitHub App was not connected', message, facts });
}

/** Binds the installation GitHub listed for the installer, unless another organization owns it. */
async function bind(
  deps: Deps,
  installer: { claims: FlowStateClaims; installationId: number; account: string | null },
  log: AppContext['state']['log'],
) {
  const { claims, installationId, account } = installer;
  const bound = await bindInstallation(deps.db, {
    installationId,
    organizationId: claims.organizationId,
    via: 'install_flow',
    memberId: claims.memberId,
    account: account ?? undefined,
  });
  log.info({ installationId, organizationId: claims.organizationId, outcome: bound.outcome }, 'github installation setup');
  if (bound.outcome === 'owned_elsewhere') {
    return refused(409, {
      reason: 'owned_elsewhere',
      message: 'This installation is already connected to another organization.',
      installationId,
    });
  }
  if (bound.outcome === 'organization_not_found') {
    return refused(403, {
      reason: 'organization_not_found',
      message: 'The organization of this install link no longer exists.',
      installationId,
    });
  }
  const facts: [string, string][] = [['Installation', String(installationId)]];
  if (account !== null) facts.push(['GitHub account', account]);
  const again = bound.outcome === 'already_bound' ? ' It already was.' : '';
  return flowPage({
    status: 200,
    title: 'The GitHub App is connected',
    message: `The installation is connected to your organization.${again} You can close this page.`,
    facts,
  });
}

async function completeSetup(
  deps: Deps & { installer: InstallerClient },
  query: z.output<typeof SetupQuery>,
  ctx: AppContext,
): Promise<Reply> {
  const callback = readCallback(query);
  if (!callback.ok) return refused(400, { reason: 'invalid_callback', message: callback.message });
  if (callback.action === 'request') {
    return flowPage({
      status: 200,
      title: 'Installation requested',
      message: `An owner of the GitHub account must approve the installation. ${START_AGAIN}`,
    });
  }
  const { installationId } = callback;
  const verdict = await consumeFlowState(deps, callback.state, INSTALL_FLOW.purpose);
  if (!verdict.ok) {
    ctx.state.log.info({ installationId, reason: verdict.reason }, 'github installation setup refused: state');
    return refused(400, {
      reason: `state_${verdict.reason}`,
      message: `${FLOW_STATE_REFUSALS[verdict.reason]} ${START_AGAIN}`,
      installationId,
    });
  }
  if (!(await stillAdmin(deps, verdict.claims))) {
    return refused(403, {
      reason: 'not_admin',
      message: 'The admin who asked for this install link can no longer connect installations.',
      installationId,
    });
  }
  const check = await deps.installer.checkInstaller(callback.code, installationId);
  if (!check.ok) {
    ctx.state.log.warn({ installationId, failure: check.failure, code: check.code }, 'github installation setup: GitHub refused or failed');
    if (check.failure === 'refused') {
      return refused(400, {
        reason: 'authorization_refused',
        message: `GitHub refused the authorization (${check.code}). ${START_AGAIN}`,
        installationId,
      });
    }
    return refused(502, {
      reason: 'github_unavailable',
      message: 'GitHub could not be reached to confirm the installation. Try again later.',
      installationId,
    });
  }
  if (!check.visible) {
    ctx.state.log.info(
      { installationId, organizationId: verdict.claims.organizationId },
      'github installation setup refused: not listed for the installer',
    );
    return refused(403, {
      reason: 'installation_not_visible',
      message: 'GitHub does not list this installation for the account that authorized it.',
      installationId,
    });
  }
  return bind(deps, { claims: verdict.claims, installationId, account: check.account }, ctx.state.log);
}

async function setup(deps: Deps, query: z.output<typeof SetupQuery>, ctx: AppContext): Promise<Reply> {
  const { installer } = deps;
  if (!installer) {
    return refused(409, {
      reason: 'not_configured',
      message:
        'Installing the GitHub App from this service is not configured. An operator can connect an installation with `den github installations bind`.',
    });
  }
  try {
    return await completeSetup({ ...deps, installer }, query, ctx);
  } catch (error) {
    if (!(error instanceof AppError && error.dependency !== undefined)) throw error;
    const page = refused(503, {
      reason: 'unavailable',
      message: `The service is briefly unavailable, and this install link may be used up. ${START_AGAIN}`,
    });
    return { ...page, headers: { ...page.headers, 'retry-after': '5' } };
  }
}

export function createSetupRoute(deps: Deps): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/connectors/github/setup',
    summary: "The GitHub App's Callback URL: binds the installation its installer can see (an HTML page)",
    description:
      'Register it as the App’s **Callback URL** with *Request user authorization (OAuth) during installation* on. ' +
      'The state must come from `POST /v1/connectors/github/installations/install-url`; the installation is bound to its ' +
      'organization only when `GET /user/installations`, with the installer’s token, lists it. Every answer is an HTML page.',
    tags: ['Connectors'],
    auth: 'public',
    query: SetupQuery,
    responses: {
      200: html('The installation is connected (or already was), or the installation was only requested.'),
      400: html(
        'A parameter is missing or malformed, the state is refused (malformed, altered, for another flow, expired or used), or GitHub refused the code.',
      ),
      403: html('GitHub does not list the installation for the installer, or the admin of the link is no longer one.'),
      409: html('Another organization owns the installation, or the install flow is not configured.'),
      502: html('GitHub could not be reached.'),
      503: html('Postgres is unavailable; try again.'),
    },
    handler: ({ query }, ctx) => setup(deps, query, ctx),
  });
}
