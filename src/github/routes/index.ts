/** GitHub routes, one module each: the App webhook and the sync-event listing. */
import type { Route } from '../../app/http/route';
import type { GithubRouteDeps } from './shared';
import { createSyncEventsRoute } from './sync-events';
import { createWebhookRoute } from './webhook';

export type { GithubRouteDeps } from './shared';

export function createGithubRoutes(deps: GithubRouteDeps): Route[] {
  return [createWebhookRoute(deps), createSyncEventsRoute(deps)];
}
