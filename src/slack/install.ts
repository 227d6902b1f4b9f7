/**
 * Slack's OAuth v2 install of one connection's app
 * (https://docs.slack.dev/authentication/installing-with-oauth): the admin opens Slack's
 * authorize page with the manifest's bot scopes, the callback's redirect URL and a state; Slack
 * sends them back with a code, which `oauth.v2.access` trades, with that connection's client id
 * and secret, for the bot token, the bot user, the workspace and the app.
 *
 * The state is the install flow's own (src/app/install-flow.ts, purpose `slack_install`): signed,
 * single-use, ten minutes, bound to the organization, the admin and the connection (its subject).
 * @slack/oauth's InstallProvider is not used: it holds one app's client credentials and its own
 * state store and installation store, and answers the callback on Node's response itself, where
 * each connection here is an app of its own with credentials in Postgres, the state must be the
 * install flow's, and the answer is the route's page. The exchange and the revocation go through
 * @slack/web-api (src/slack/web-api.ts); the authorize URL is Slack's page with its four documented
 * query parameters, set through URLSearchParams.
 */
import { manifestNeeds } from './manifest';

export const SLACK_INSTALL_FLOW = { purpose: 'slack_install', ttlMs: 10 * 60_000 } as const;

/** Slack's authorize page for this app, asking for the bot scopes, returning to `redirectUri` with `state`. */
export function authorizeUrl(authorizePage: string, input: { clientId: string; redirectUri: string; state: string }): string {
  const url = new URL(authorizePage);
  url.searchParams.set('client_id', input.clientId);
  // Every setting asks the same scopes (follow-ups add events only).
  url.searchParams.set('scope', manifestNeeds({ threadFollowUps: 'off' }).scopes.join(','));
  url.searchParams.set('redirect_uri', input.redirectUri);
  url.searchParams.set('state', input.state);
  return url.toString();
}
