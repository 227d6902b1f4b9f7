/**
 * Routes of removed features answer 410 so old clients learn they are gone instead
 * of getting a confusing 404. Add an entry here when a feature is removed.
 */
export interface RemovedRoute {
  /** A Koa path pattern; `{*rest}` matches everything below it. */
  path: string;
  removedIn: string;
  replacement?: string;
}

/** None yet: this service has removed no route. The mechanism is tested with entries of its own. */
export const REMOVED_ROUTES: RemovedRoute[] = [];
