/**
 * Slack ingress, one module per route, served on the provider paths and on the neutral
 * `chatplatform` paths: signed events, slash commands and interactions, and account links.
 */
import type { Route } from '../../app/http/route';
import { createAccountLinksRoute } from './account-links';
import { createCommandsRoute } from './commands';
import { createEventsRoute } from './events';
import { createInteractionsRoute } from './interactions';
import type { SlackRouteDeps } from './shared';

export type { SlackRouteDeps } from './shared';

export function createSlackRoutes(deps: SlackRouteDeps): Route[] {
  return [createEventsRoute(deps), createCommandsRoute(deps), createInteractionsRoute(deps), createAccountLinksRoute(deps)];
}
