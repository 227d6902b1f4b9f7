/**
 * GET /v1/integrations/slack/oauth/callback: where Slack's OAuth install sends the admin back,
 * with the install's `code` and the state of the install link (src/slack/routes/install-url.ts),
 * or with `error` when they did not allow the app.
 *
 * The state is consumed (signature, purpose, expiry, single use); its admin must still be an
 * admin, and its connection (the state's subject) one of its organization's. The code is then
 * exchanged with `oauth.v2.access` using that connection's client id and secret, so a code Slack
 * issued for another app is refused by Slack itself; the workspace and app Slack names must be
 * the ones the connection is bound to, if any, and no other connection's. Only then are the bot
 * token, the bot user, the workspace and the app stored; a reinstall replaces the token. A token
 * obtained for an install that is then refused is revoked at once.
 *
 * Every answer is a short HTML page (src/app/install-flow.ts): the query schema accepts anything a
 * query string can hold, so no input is refused before the handler.
 */
import { AppError } from '../../app/errors';
import { isAdmin } from '../../app/http/auth';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import {
  consumeFlowState,
  FLOW_STATE_REFUSALS,
  FLOW_STATE_SHAPE,
  flowPage,
  readFlowState,
  type FlowStateClaims,
  type FlowStateRefusal,
} from '../../app/install-flow';
import { liveMember } from '../../identity';
import { findClientCredentials, recordSlackInstall, type InstallRefusal } from '../connection-lifecycle';
import { SLACK_INSTALL_FLOW } from '../install';
import { OAUTH_CALLBACK_PATH, oauthRedirectUrl } from '../manifest';
import { authRevoke, oauthV2Access } from '../web-api';
import { recordInstalledApp } from '../conversation-settings';
import type { SlackRouteDeps } from './shared';

type Deps = Pick<SlackRouteDeps, 'db' | 'secretKey' | 'now' | 'settings' | 'platform'>;

const ASK_FOR_NEW_LINK = 'Ask an admin of your organization for a new install link and start again.';
const OAUTH_CODE = /^[\x21-\x7e]{1,512}$/;
const SLACK_ERROR = /^[a-z0-9_]{1,64}$/;

/**
 * A query value that is one string of its pattern, else undefined: each parameter is documented
 * with the pattern it must match, and a value that does not (or a name given twice, which Koa
 * reads as an array) gets this route's own HTML page, not the pipeline's JSON 400.
 */
const oneValue = (pattern: RegExp, description: string) =>
  z.string().regex(pattern).optional().catch(undefined).openapi({ type: 'string', pattern: pattern.source, description });

const CallbackQuery = z.object({
  state: oneValue(FLOW_STATE_SHAPE, 'The state of the install link, as `POST …/install` signed it.'),
  code: oneValue(OAUTH_CODE, "The install's code, exchanged once with `oauth.v2.access`."),
  error: oneValue(SLACK_ERROR, 'Why Slack did not install the app (`access_denied` when the admin cancelled).'),
});

const InstallResultPage = z.string().openapi({ description: 'A short HTML page saying what happened.' });
const installPage = (description: string) => ({ description, schema: InstallResultPage, contentType: 'text/html' });

/** Why an install was refused: the status, the coded reason, what the page says, and any facts it shows below. */
interface InstallRefused {
  status: number;
  reason: string;
  message: string;
  facts?: [string, string][];
}

/** A page saying the app was not connected, with the coded reason. */
function refusedPage({ status, reason, message, facts = [] }: InstallRefused): Reply {
  return flowPage({ status, title: 'Slack was not connected', message, facts: [['Reason', reason], ...facts] });
}

const INSTALL_REFUSALS: Record<InstallRefusal, { status: number; message: string }> = {
  not_found: { status: 404, message: 'The connection of this install link no longer exists.' },
  team_mismatch: {
    status: 409,
    message: 'This connection belongs to another Slack workspace: install its app there, or create a new connection.',
  },
  app_mismatch: { status: 409, message: 'Slack installed another app than the one this connection is bound to.' },
  bound_elsewhere: { status: 409, message: 'This app is already connected in this workspace through another connection.' },
};

type ReadCallback = { ok: true; code: string; state: string } | { ok: false; page: Reply };

/** A state this service did not issue for this flow, or no longer honours: the install is refused (403). */
function stateRefused(reason: FlowStateRefusal | 'missing'): Reply {
  if (reason === 'missing')
    return refusedPage({
      status: 403,
      reason: 'invalid_callback',
      message: `This address completes an install link of this service. ${ASK_FOR_NEW_LINK}`,
    });
  return refusedPage({ status: 403, reason: `state_${reason}`, message: `${FLOW_STATE_REFUSALS[reason]} ${ASK_FOR_NEW_LINK}` });
}

/**
 * The callback's parameters, each present once and well-formed, or the page that says why not.
 * The state is read first (its signature, purpose and expiry; not yet whether it was used): a
 * request without a state of this service's install flow is refused whatever else it carries.
 */
function readOAuthCallback(deps: Deps, query: z.output<typeof CallbackQuery>): ReadCallback {
  const { code, state, error } = query;
  if (state === undefined) return { ok: false, page: stateRefused('missing') };
  const read = readFlowState(deps.secretKey, state, { purpose: SLACK_INSTALL_FLOW.purpose, now: deps.now() });
  if (!read.ok) return { ok: false, page: stateRefused(read.reason) };
  if (error !== undefined) {
    return {
      ok: false,
      page: refusedPage({ status: 400, reason: 'slack_error', message: `Slack did not install the app (${error}). ${ASK_FOR_NEW_LINK}` }),
    };
  }
  if (code === undefined) {
    return {
      ok: false,
      page: refusedPage({ status: 400, reason: 'invalid_callback', message: 'Slack sent no valid authorization code.' }),
    };
  }
  return { ok: true, code, state };
}

/** Whether the admin who asked for the link is still an admin of its organization. */
async function isStillAdmin(deps: Deps, claims: FlowStateClaims): Promise<boolean> {
  const member = await liveMember(deps.db, claims.memberId).catch(() => undefined);
  return member !== undefined && member.organization_id === claims.organizationId && isAdmin(member.role);
}

/** The state's connection and its client credentials, or the page that says why the install cannot go on. */
async function credentialsFor(
  deps: Deps,
  claims: FlowStateClaims,
): Promise<{ page: Reply } | { connectionId: string; clientId: string; clientSecret: string }> {
  const connectionId = claims.subject ?? '';
  const credentials = await findClientCredentials(deps.db, deps.secretKey, connectionId);
  if (!credentials) {
    return { page: refusedPage({ status: 404, reason: 'connection_not_found', message: INSTALL_REFUSALS.not_found.message }) };
  }
  if (credentials.organizationId !== claims.organizationId) {
    return {
      page: refusedPage({
        status: 403,
        reason: 'other_organization',
        message: `The install link names a connection of another organization. ${ASK_FOR_NEW_LINK}`,
      }),
    };
  }
  if (credentials.clientId === null || credentials.clientSecret === null) {
    return {
      page: refusedPage({
        status: 409,
        reason: 'credentials_missing',
        message: 'The connection has no client id and secret: set its credentials, then install it again.',
      }),
    };
  }
  return { connectionId, clientId: credentials.clientId, clientSecret: credentials.clientSecret };
}

async function completeInstall(deps: Deps, query: z.output<typeof CallbackQuery>, ctx: AppContext): Promise<Reply> {
  const callback = readOAuthCallback(deps, query);
  if (!callback.ok) return callback.page;
  const verdict = await consumeFlowState(deps, callback.state, SLACK_INSTALL_FLOW.purpose);
  if (!verdict.ok) {
    ctx.state.log.info({ reason: verdict.reason }, 'slack install refused: state');
    return stateRefused(verdict.reason);
  }
  const claims = verdict.claims;
  if (!(await isStillAdmin(deps, claims)))
    return refusedPage({
      status: 403,
      reason: 'not_admin',
      message: 'The admin who asked for this install link can no longer install apps.',
    });
  const app = await credentialsFor(deps, claims);
  if ('page' in app) return app.page;
  const exchanged = await oauthV2Access(deps.settings.apiBaseUrl, {
    clientId: app.clientId,
    clientSecret: app.clientSecret,
    code: callback.code,
    redirectUri: oauthRedirectUrl(deps.platform.publicBaseUrl),
  });
  if (!exchanged.ok) {
    ctx.state.log.warn({ connectionId: app.connectionId, error: exchanged.error }, 'slack install: oauth.v2.access refused or failed');
    return exchanged.refused
      ? refusedPage({
          status: 400,
          reason: 'authorization_refused',
          message: `Slack refused the authorization (${exchanged.error}). ${ASK_FOR_NEW_LINK}`,
        })
      : refusedPage({
          status: 502,
          reason: 'slack_unavailable',
          message: `Slack could not be reached to complete the install, and this install link is now used. ${ASK_FOR_NEW_LINK}`,
        });
  }
  return bindInstall(deps, ctx, { claims, connectionId: app.connectionId, install: exchanged.install });
}

/** An install Slack granted: the install link's claims, its connection, and what `oauth.v2.access` answered. */
interface GrantedInstall {
  claims: FlowStateClaims;
  connectionId: string;
  install: Extract<Awaited<ReturnType<typeof oauthV2Access>>, { ok: true }>['install'];
}

/** Stores the install, or refuses it and revokes the token Slack just issued for it. */
async function bindInstall(deps: Deps, ctx: AppContext, { claims, connectionId, install }: GrantedInstall): Promise<Reply> {
  const { teamId, appId, botToken } = install;
  if (teamId === null || appId === null || botToken === null) {
    if (botToken !== null) await authRevoke(deps.settings.apiBaseUrl, botToken);
    return refusedPage({
      status: 400,
      reason: 'no_workspace_install',
      message: 'Slack did not install the app in a workspace with a bot user.',
    });
  }
  const recorded = await recordSlackInstall(
    deps,
    {
      connectionId,
      organizationId: claims.organizationId,
      memberId: claims.memberId,
      teamId,
      teamName: install.teamName,
      appId,
      botToken,
      rotation: install.rotation,
      botUserId: install.botUserId,
    },
    new Date(deps.now()),
  );
  ctx.state.log.info({ connectionId, teamId, appId, outcome: recorded.ok ? 'installed' : recorded.reason }, 'slack install');
  const workspace: [string, string] = ['Workspace', install.teamName ?? teamId];
  if (!recorded.ok) {
    await authRevoke(deps.settings.apiBaseUrl, botToken);
    const refusal = INSTALL_REFUSALS[recorded.reason];
    return refusedPage({ ...refusal, reason: recorded.reason, facts: [workspace] });
  }
  await recordInstalledApp(deps.db, connectionId, { grantedScopes: install.scopes, defaultFollowUps: deps.settings.threadFollowUps });
  const again = recorded.reinstall ? ' Its bot token was replaced.' : '';
  return flowPage({
    status: 200,
    title: 'Slack is connected',
    message: `Connected to workspace ${install.teamName ?? teamId}; you can close this tab.${again}`,
    facts: [workspace, ['Connection', connectionId]],
  });
}

async function callback(deps: Deps, query: z.output<typeof CallbackQuery>, ctx: AppContext): Promise<Reply> {
  try {
    return await completeInstall(deps, query, ctx);
  } catch (error) {
    if (!(error instanceof AppError && error.dependency !== undefined)) throw error;
    const page = refusedPage({
      status: 503,
      reason: 'unavailable',
      message: `The service is briefly unavailable, and this install link may be used up. ${ASK_FOR_NEW_LINK}`,
    });
    return { ...page, headers: { ...page.headers, 'retry-after': '5' } };
  }
}

export function createOAuthCallbackRoute(deps: Deps): Route {
  return defineRoute({
    method: 'get',
    path: OAUTH_CALLBACK_PATH,
    summary: "Slack's OAuth redirect URL: stores the install of a connection's app (an HTML page)",
    description:
      'The manifest names it as the app’s redirect URL. The state must come from `POST /v1/integrations/slack/connections/{connectionId}/install`; ' +
      'the code is exchanged with `oauth.v2.access` using that connection’s client credentials. Every answer is an HTML page.',
    tags: ['Slack'],
    auth: 'public',
    query: CallbackQuery,
    responses: {
      200: installPage('Connected (or the token of a reinstall replaced).'),
      400: installPage('Slack sent an error or no valid code with a genuine state, or Slack refused the code.'),
      403: installPage(
        'No state of this service’s install flow (missing, malformed, altered, for another flow, expired or used), the admin of the link is no longer one, or the link names another organization’s connection.',
      ),
      404: installPage('The connection of the link no longer exists.'),
      409: installPage('The connection has no credentials, or is bound to another workspace or app, or another connection holds this app.'),
      502: installPage('Slack could not be reached.'),
      503: installPage('Postgres is unavailable; try again.'),
    },
    handler: ({ query }, ctx) => callback(deps, query, ctx),
  });
}
