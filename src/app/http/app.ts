/**
 * The Koa front door. Middleware order (platform issue §4): request id → logging → error
 * mapper → per-route body limits (inside each route, see route.ts) → routes.
 */
import Koa from 'koa';
import Router from '@koa/router';
import { errors } from '../errors';
import { identityRoutes } from '../../identity/routes';
import { githubRoutes } from '../../github/routes';
import { slackRoutes } from '../../slack/routes';
import { mcpRoutes } from '../../mcp/routes';
import { runRoutes } from '../../runs/routes';
import type { AppContext, AppState } from './context';
import { errorMapper } from './middleware/errors';
import { requestLogging } from './middleware/logging';
import { requestId } from './middleware/request-id';
import { createOpenApi } from './openapi';
import { mountRoute, type RouteDefinition } from './route';
import { REMOVED_ROUTES } from './deprecated';
import { systemRoutes } from './system-routes';
import type { Services } from './services';

export const ALL_ROUTES: RouteDefinition[] = [
  ...systemRoutes,
  ...identityRoutes,
  ...runRoutes,
  ...slackRoutes,
  ...githubRoutes,
  ...mcpRoutes,
];

export function createApp(services: Services): Koa<AppState> {
  const app = new Koa<AppState>({ proxy: false });
  // Koa's default error listener prints stacks to stderr; our mapper already logged it.
  app.silent = true;
  const openapi = createOpenApi();
  const router = new Router<AppState>();
  for (const route of ALL_ROUTES) mountRoute(router, openapi, route);
  for (const removed of REMOVED_ROUTES) {
    router.all(removed.path.replace(/\{(\w+)\}/g, ':$1'), () => {
      throw errors.gone(
        `Removed in ${removed.removedIn}.${removed.replacement ? ` Use ${removed.replacement} instead.` : ''}`,
      );
    });
  }

  app.use(async (ctx, next) => {
    ctx.state.services = services;
    ctx.state.log = services.log;
    ctx.state.openapiDocument = () => openapi.document();
    await next();
  });
  app.use((ctx, next) => requestId(ctx as AppContext, next));
  app.use((ctx, next) => requestLogging(ctx as AppContext, next));
  app.use((ctx, next) => errorMapper(ctx as AppContext, next));
  app.use(router.routes());
  app.use(router.allowedMethods());
  return app;
}
