/**
 * The Koa front door. Middleware order (platform issue §4): request id → logging → error
 * mapper → per-route body limits (inside each route, see route.ts) → routes. It mounts the
 * routes it is given; it knows no feature (src/app/compose.ts chooses them).
 */
import Koa, { type Next } from 'koa';
import Router from '@koa/router';
import { errors } from '../errors';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import type { Authenticator } from './auth';
import type { AppContext, AppState } from './context';
import type { RemovedRoute } from './deprecated';
import { errorMapper } from './middleware/errors';
import { requestLogging } from './middleware/logging';
import { requestId } from './middleware/request-id';
import { mountRoute, type Route } from './route';

export interface AppDeps {
  routes: Route[];
  authenticate: Authenticator;
  log: Logger;
  metrics: Metrics;
  removedRoutes: RemovedRoute[];
}

export function createApp(deps: AppDeps): Koa<AppState> {
  const app = new Koa<AppState>({ proxy: false });
  // Koa's default error listener prints stacks to stderr; our mapper already logged it.
  app.silent = true;
  const router = new Router<AppState>();
  for (const route of deps.routes) mountRoute(router, route, { authenticate: deps.authenticate, metrics: deps.metrics });
  for (const removed of deps.removedRoutes) {
    router.all(removed.path.replace(/\{(\w+)\}/g, ':$1'), (ctx) => {
      ctx.state.routeTemplate = removed.path;
      throw errors.gone(
        `Removed in ${removed.removedIn}.${removed.replacement ? ` Use ${removed.replacement} instead.` : ''}`,
      );
    });
  }

  app.use((ctx, next) => requestId(ctx as AppContext, next));
  app.use((ctx, next) => requestLogging(ctx as AppContext, next, deps));
  app.use((ctx, next) => errorMapper(ctx as AppContext, next));
  app.use((ctx, next) => methodNotAllowed(ctx as AppContext, next, router));
  app.use(router.routes());
  return app;
}

/**
 * A known path asked with a method it does not declare (TRACE, OPTIONS, a typo…) is a 405 with
 * `Allow`, never koa-router's 501: an unknown method is the client's mistake, not ours. The
 * label is the path's template, so no request can add a metric series of its own.
 */
async function methodNotAllowed(ctx: AppContext, next: Next, router: Router<AppState>): Promise<void> {
  await next();
  if (ctx.status !== 404 || ctx.body !== undefined) return;
  const layers = router.match(ctx.path, ctx.method).path;
  const allowed = [...new Set(layers.flatMap((layer) => layer.methods))];
  if (allowed.length === 0) return;
  ctx.state.routeTemplate ??= String(layers[0]!.path).replace(/:(\w+)/g, '{$1}');
  ctx.status = 405;
  ctx.set('allow', allowed.join(', '));
  ctx.body = { error: 'method_not_allowed', message: `${ctx.method} is not allowed on this path; allowed: ${allowed.join(', ')}.` };
}
