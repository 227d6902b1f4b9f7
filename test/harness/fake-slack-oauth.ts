/**
 * The apps and installs of the fake Slack (test/harness/fake-slack.ts), as strict as Slack where
 * the service meets them (https://docs.slack.dev/authentication/installing-with-oauth):
 *
 * - An app is created from a manifest, as *Create New App → From a manifest* does: its required
 *   parts are checked (a name of at most 35 characters, a bot user whose display name takes only
 *   `a-z0-9-_.`, bot scopes, a Request URL for events, commands and interactivity, the redirect
 *   URLs), each bot event needs its scope (`app_mention` `app_mentions:read`, `message.im`
 *   `im:history`), and it gets its app id, client id, client secret and signing secret. Then, as
 *   Slack does, the events Request URL is checked with a signed `url_verification` challenge; the
 *   check can be run again (the *Retry* button). Unlike Slack, http Request URLs are accepted: the
 *   service under test listens on loopback without TLS.
 * - The authorize page (`GET /oauth/v2/authorize`) needs a known `client_id`, a `redirect_uri`
 *   that is one of the app's redirect URLs exactly, and scopes among the app's bot scopes; the
 *   signed-in user's workspace is the `fake_slack_team` cookie. It redirects with a `code` and the
 *   `state`, or `error=access_denied` when the user cancels (`fake_slack_deny=1`).
 * - `oauth.v2.access` checks the client id (`invalid_client_id`), the secret (`bad_client_secret`),
 *   the code: known, issued for this client, unused and at most 10 minutes old (`invalid_code`),
 *   and the redirect URI against the one the code was issued for (`bad_redirect_uri`). Each
 *   exchange issues a bot token for the app in that workspace.
 * - `auth.revoke` revokes the calling token (`invalid_auth` for one that no longer works); a revoked
 *   token gets `token_revoked` from every method after.
 * - Tokens (https://docs.slack.dev/authentication/using-token-rotation): a token the fake never
 *   issued gets `invalid_auth` from every method; a test issues one as an operator would paste it
 *   (issueToken). An app whose manifest turns `settings.token_rotation_enabled` on gets expiring
 *   tokens: `oauth.v2.access` answers `refresh_token` and `expires_in` too, an expired token gets
 *   `token_expired`, and `grant_type=refresh_token` with the app's client credentials trades a
 *   refresh token, once, for a new access token and a new refresh token (a refresh token used
 *   before, or never issued, is refused).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type http from 'node:http';
import { signSlackRequest } from '../../src/slack/signature';

export interface FakeSlackApp {
  appId: string;
  clientId: string;
  clientSecret: string;
  signingSecret: string;
  manifest: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Whether Slack's last check of the events Request URL got its challenge back. */
  eventsUrlVerified: boolean;
}

interface IssuedCode {
  clientId: string;
  redirectUri: string;
  teamId: string;
  scopes: string[];
  issuedAt: number;
  used: boolean;
}

export interface FakeToken {
  appId: string;
  teamId: string;
  revoked: boolean;
  /** A rotating token's expiry (ms since the epoch); a token without one never expires. */
  expiresAt?: number;
}

/** A refresh token of a rotating app's install: it works once. */
interface FakeRefreshToken {
  appId: string;
  teamId: string;
  used: boolean;
}

export interface OAuthState {
  apps: Map<string, FakeSlackApp>;
  workspaces: Map<string, string>;
  codes: Map<string, IssuedCode>;
  tokens: Map<string, FakeToken>;
  refreshTokens: Map<string, FakeRefreshToken>;
  /** How long a rotating app's access token lives: Slack's is 12 hours; a test may shorten it. */
  tokenLifetimeMs: number;
}

const TOKEN_LIFETIME_MS = 12 * 3_600_000;

export const newOAuthState = (): OAuthState => ({
  apps: new Map(),
  workspaces: new Map(),
  codes: new Map(),
  tokens: new Map(),
  refreshTokens: new Map(),
  tokenLifetimeMs: TOKEN_LIFETIME_MS,
});

const CODE_LIFETIME_MS = 10 * 60_000;
const EVENT_SCOPES: Record<string, string> = {
  app_mention: 'app_mentions:read',
  'message.im': 'im:history',
  'message.channels': 'channels:history',
  'message.groups': 'groups:history',
  'message.mpim': 'mpim:history',
  assistant_thread_started: 'assistant:write',
  assistant_thread_context_changed: 'assistant:write',
};
const id = (prefix: string) => `${prefix}${randomUUID().replace(/-/g, '').slice(0, 10).toUpperCase()}`;
const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** What Slack refuses in a manifest, or undefined when it takes it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function manifestError(manifest: Record<string, any>): string | undefined {
  const name = manifest.display_information?.name;
  if (typeof name !== 'string' || name.length === 0 || name.length > 35) return 'display_information.name: 1 to 35 characters';
  const bot = manifest.features?.bot_user?.display_name;
  if (typeof bot !== 'string' || !/^[a-z0-9._-]{1,80}$/.test(bot)) return 'features.bot_user.display_name: a-z, 0-9, -, _ and . only';
  const scopes: string[] = manifest.oauth_config?.scopes?.bot ?? [];
  if (scopes.length === 0) return 'oauth_config.scopes.bot: required';
  const events = manifest.settings?.event_subscriptions;
  if (!events?.request_url) return 'settings.event_subscriptions.request_url: required';
  for (const event of events.bot_events ?? []) {
    const scope = EVENT_SCOPES[event];
    if (scope && !scopes.includes(scope)) return `bot event ${event} requires the scope ${scope}`;
  }
  for (const command of manifest.features?.slash_commands ?? []) if (!command.url) return `slash command ${command.command}: url required`;
  const agent = manifest.features?.agent_view;
  if (agent && (String(agent.agent_description ?? '').length > 300 || (agent.suggested_prompts ?? []).length > 4))
    // The limits @slack/web-api's manifest types state (ManifestAgentView).
    return 'features.agent_view: a description of at most 300 characters and at most 4 suggested prompts';
  if (manifest.settings?.interactivity?.is_enabled && !manifest.settings.interactivity.request_url)
    return 'interactivity: request_url required';
  if (!Array.isArray(manifest.oauth_config?.redirect_urls) || manifest.oauth_config.redirect_urls.length === 0)
    return 'oauth_config.redirect_urls: required';
  return undefined;
}

/** Slack's check of an events Request URL: a signed url_verification challenge that must come back. */
export async function checkEventsUrl(app: FakeSlackApp): Promise<{ status: number; verified: boolean }> {
  const challenge = hex(16);
  const body = JSON.stringify({ token: 'deprecated', challenge, type: 'url_verification' });
  const timestamp = Math.floor(Date.now() / 1000);
  const response = await fetch(app.manifest.settings.event_subscriptions.request_url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-slack-request-timestamp': String(timestamp),
      'x-slack-signature': signSlackRequest(app.signingSecret, timestamp, body),
    },
    body,
  });
  const text = await response.text();
  let answer: { challenge?: unknown } = {};
  try {
    answer = JSON.parse(text) as { challenge?: unknown };
  } catch {
    // Not the challenge: the check fails.
  }
  app.eventsUrlVerified = response.status === 200 && answer.challenge === challenge;
  return { status: response.status, verified: app.eventsUrlVerified };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function createApp(state: OAuthState, manifest: Record<string, any>): FakeSlackApp {
  const error = manifestError(manifest);
  if (error) throw new Error(`Slack refuses the manifest: ${error}`);
  const app: FakeSlackApp = {
    appId: id('A'),
    clientId: `${Date.now()}.${Math.floor(Math.random() * 1e12)}`,
    clientSecret: hex(16),
    signingSecret: hex(16),
    manifest: structuredClone(manifest),
    eventsUrlVerified: false,
  };
  state.apps.set(app.appId, app);
  return app;
}

export function addWorkspace(state: OAuthState, name = `workspace-${randomUUID().slice(0, 6)}`, teamId = id('T')): string {
  state.workspaces.set(teamId, name);
  return teamId;
}

const appByClient = (state: OAuthState, clientId: unknown) => [...state.apps.values()].find((app) => app.clientId === clientId);

/** A code as the authorize page would issue it (a test may exchange it with another app's credentials). */
export function issueCode(state: OAuthState, input: { clientId: string; redirectUri: string; teamId: string; scopes: string[] }): string {
  const code = `${Date.now()}.${hex(20)}`;
  state.codes.set(code, { ...input, issuedAt: Date.now(), used: false });
  return code;
}

function page(res: http.ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(text);
}

function cookie(req: http.IncomingMessage, name: string): string | undefined {
  return (req.headers.cookie ?? '')
    .split(';')
    .map((part) => part.trim().split('='))
    .find(([key]) => key === name)?.[1];
}

/** GET /oauth/v2/authorize: Slack's page, with the user's answer already given (allow, or cancel with `fake_slack_deny=1`). */
export function authorize(state: OAuthState, req: http.IncomingMessage, res: http.ServerResponse): void {
  const query = new URL(req.url ?? '/', 'http://fake').searchParams;
  const app = appByClient(state, query.get('client_id'));
  if (!app) return page(res, 400, 'invalid_client_id');
  const redirectUri = query.get('redirect_uri') ?? '';
  if (!(app.manifest.oauth_config.redirect_urls as string[]).includes(redirectUri)) return page(res, 400, 'bad_redirect_uri');
  const scopes = (query.get('scope') ?? '').split(',').filter(Boolean);
  const allowed: string[] = app.manifest.oauth_config.scopes.bot;
  if (scopes.length === 0 || scopes.some((scope) => !allowed.includes(scope))) return page(res, 400, 'invalid_scope');
  const teamId = cookie(req, 'fake_slack_team');
  if (!teamId || !state.workspaces.has(teamId)) return page(res, 401, 'not signed in to a workspace');
  const back = new URL(redirectUri);
  if (cookie(req, 'fake_slack_deny') === '1') back.searchParams.set('error', 'access_denied');
  else back.searchParams.set('code', issueCode(state, { clientId: app.clientId, redirectUri, teamId, scopes }));
  if (query.get('state') !== null) back.searchParams.set('state', query.get('state')!);
  res.writeHead(302, { location: back.toString() });
  res.end();
}

type Answer = { status: number; body: Record<string, unknown>; headers?: Record<string, string> };
const fail = (error: string): Answer => ({ status: 200, body: { ok: false, error } });

/** The client credentials of an oauth.v2.access call: HTTP Basic, else the form's fields. */
function clientCredentials(authorization: string | undefined, body: Record<string, unknown>): { id: unknown; secret: unknown } {
  if (authorization?.startsWith('Basic ')) {
    const [user, password] = Buffer.from(authorization.slice(6), 'base64').toString('utf8').split(':');
    return { id: user, secret: password };
  }
  return { id: body.client_id, secret: body.client_secret };
}

export function oauthV2Access(state: OAuthState, authorization: string | undefined, body: Record<string, unknown>): Answer {
  const credentials = clientCredentials(authorization, body);
  const app = appByClient(state, credentials.id);
  if (!app) return fail('invalid_client_id');
  if (credentials.secret !== app.clientSecret) return fail('bad_client_secret');
  if (body.grant_type === 'refresh_token') return refreshAccess(state, app, body);
  const code = state.codes.get(String(body.code ?? ''));
  if (!code || code.clientId !== app.clientId || code.used || Date.now() - code.issuedAt > CODE_LIFETIME_MS) return fail('invalid_code');
  if (body.redirect_uri !== code.redirectUri) return fail('bad_redirect_uri');
  code.used = true;
  return {
    status: 200,
    body: {
      ok: true,
      ...issueAccess(state, app, code.teamId),
      token_type: 'bot',
      scope: code.scopes.join(','),
      bot_user_id: `UB${app.appId.slice(1)}`,
      app_id: app.appId,
      team: { id: code.teamId, name: state.workspaces.get(code.teamId) },
      enterprise: null,
      is_enterprise_install: false,
      authed_user: { id: id('U') },
    },
  };
}

const rotates = (app: FakeSlackApp) => app.manifest.settings?.token_rotation_enabled === true;

/** A bot token for the app in the workspace: with rotation on, an expiring one and its refresh token. */
function issueAccess(state: OAuthState, app: FakeSlackApp, teamId: string): Record<string, unknown> {
  if (!rotates(app)) {
    const token = `xoxb-${hex(12)}-${hex(12)}`;
    state.tokens.set(token, { appId: app.appId, teamId, revoked: false });
    return { access_token: token };
  }
  const token = `xoxe.xoxb-1-${hex(16)}`;
  const refresh = `xoxe-1-${hex(20)}`;
  state.tokens.set(token, { appId: app.appId, teamId, revoked: false, expiresAt: Date.now() + state.tokenLifetimeMs });
  state.refreshTokens.set(refresh, { appId: app.appId, teamId, used: false });
  return { access_token: token, refresh_token: refresh, expires_in: Math.round(state.tokenLifetimeMs / 1000) };
}

/** `grant_type=refresh_token`: a refresh token of this app, used once, for a new access token and a new refresh token. */
function refreshAccess(state: OAuthState, app: FakeSlackApp, body: Record<string, unknown>): Answer {
  const refresh = state.refreshTokens.get(String(body.refresh_token ?? ''));
  if (!refresh || refresh.used || refresh.appId !== app.appId) return fail('invalid_refresh_token');
  refresh.used = true;
  return {
    status: 200,
    body: {
      ok: true,
      ...issueAccess(state, app, refresh.teamId),
      token_type: 'bot',
      app_id: app.appId,
      team: { id: refresh.teamId, name: state.workspaces.get(refresh.teamId) },
      enterprise: null,
      is_enterprise_install: false,
    },
  };
}

/**
 * A token as an operator pastes it (`den slack connections create --bot-token`): the fake knows it
 * from now on. With `expiresInMs`, it expires then, as a rotating app's token does.
 */
export function issueToken(state: OAuthState, input: { token: string; teamId: string; appId: string; expiresInMs?: number }): string {
  const expiresAt = input.expiresInMs === undefined ? undefined : Date.now() + input.expiresInMs;
  state.tokens.set(input.token, { appId: input.appId, teamId: input.teamId, revoked: false, ...(expiresAt ? { expiresAt } : {}) });
  return input.token;
}

/** The bearer token of a Web API call. */
export const bearer = (authorization: string | undefined, body: Record<string, unknown>): string | undefined =>
  authorization?.startsWith('Bearer ') ? authorization.slice(7) : typeof body.token === 'string' ? body.token : undefined;

export function authRevoke(state: OAuthState, token: string | undefined): Answer {
  const issued = token === undefined ? undefined : state.tokens.get(token);
  if (!issued || issued.revoked) return fail('invalid_auth');
  issued.revoked = true;
  return { status: 200, body: { ok: true, revoked: true } };
}

/** Methods called without a bot token: the OAuth exchange (client credentials) and a response_url. */
const TOKENLESS = new Set(['oauth.v2.access', 'response_url']);

/**
 * What Slack answers a call whose token does not work: `not_authed` without one, `invalid_auth`
 * for one it never issued, `token_revoked` once revoked, `token_expired` past a rotating token's expiry.
 */
export function tokenRefusal(state: OAuthState, method: string, token: string | undefined): Answer | undefined {
  if (TOKENLESS.has(method)) return undefined;
  if (token === undefined) return fail('not_authed');
  const issued = state.tokens.get(token);
  if (!issued) return fail('invalid_auth');
  if (issued.revoked) return fail('token_revoked');
  if (issued.expiresAt !== undefined && Date.now() >= issued.expiresAt) return fail('token_expired');
  return undefined;
}

/** Slack's `app_uninstalled`, signed with the app's secret, to its events Request URL; the app's tokens in the workspace stop working. */
export async function uninstall(state: OAuthState, app: FakeSlackApp, teamId: string): Promise<{ status: number; eventId: string }> {
  for (const token of state.tokens.values()) if (token.appId === app.appId && token.teamId === teamId) token.revoked = true;
  const eventId = id('Ev');
  const now = Math.floor(Date.now() / 1000);
  const body = JSON.stringify({
    token: 'deprecated',
    team_id: teamId,
    api_app_id: app.appId,
    event: { type: 'app_uninstalled', event_ts: `${now}.000100` },
    type: 'event_callback',
    event_id: eventId,
    event_time: now,
  });
  const response = await fetch(app.manifest.settings.event_subscriptions.request_url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-slack-request-timestamp': String(now),
      'x-slack-signature': signSlackRequest(app.signingSecret, now, body),
    },
    body,
  });
  await response.body?.cancel();
  return { status: response.status, eventId };
}
