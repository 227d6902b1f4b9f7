/**
 * Spec §9.3: routes of removed features answer 410 so old clients learn they are gone instead
 * of getting a confusing 404. Add an entry here when a feature is removed.
 */
export interface RemovedRoute {
  /** A Koa path pattern; `{*rest}` matches everything below it. */
  path: string;
  removedIn: string;
  replacement?: string;
}

export const REMOVED_ROUTES: RemovedRoute[] = [
  // The pre-automation run reporting API.
  { path: '/v1/runs/{*rest}', removedIn: '0.10.0', replacement: '/v1/automation-runs/{id}/events' },
  { path: '/v1/runs', removedIn: '0.10.0', replacement: '/v1/automation-runs' },
];
