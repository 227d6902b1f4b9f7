/**
 * Slack ingress, one module per route: signed events, slash commands and interactions (served on
 * the provider paths and on the neutral `chatplatform` paths), account links, and the setup of a
 * connection through the API (draft and manifest, credentials, Slack's OAuth install, removal).
 */
import type { Route } from '../../app/http/route';
import { createAccountLinksRoute, createLinkCodeRoute } from './account-links';
import { createCommandsRoute } from './commands';
import { createCreateConnectionRoute } from './create-connection';
import { createDeleteConnectionRoute } from './delete-connection';
import { createEventsRoute } from './events';
import { createGetConnectionRoute, createGetManifestRoute } from './get-connection';
import { createSlackInstallUrlRoute } from './install-url';
import { createInteractionsRoute } from './interactions';
import { createListConnectionsRoute } from './list-connections';
import { createOAuthCallbackRoute } from './oauth-callback';
import { createSetCredentialsRoute } from './set-credentials';
import type { SlackRouteDeps } from './shared';
import { createUpdateConnectionRoute } from './update-connection';

export type { SlackRouteDeps } from './shared';

export function createSlackRoutes(deps: SlackRouteDeps): Route[] {
  return [
    createEventsRoute(deps),
    createCommandsRoute(deps),
    createInteractionsRoute(deps),
    createAccountLinksRoute(deps),
    createLinkCodeRoute(deps),
    createCreateConnectionRoute(deps),
    createListConnectionsRoute(deps),
    createGetConnectionRoute(deps),
    createGetManifestRoute(deps),
    createUpdateConnectionRoute(deps),
    createSetCredentialsRoute(deps),
    createSlackInstallUrlRoute(deps),
    createDeleteConnectionRoute(deps),
    createOAuthCallbackRoute(deps),
  ];
}
