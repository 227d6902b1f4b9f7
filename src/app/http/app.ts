/**
 * The Koa front door. Middleware order: security headers → client address → request id → logging → error
 * mapper → per-route body limits (inside each route, see route.ts) → routes. It mounts the
 * routes it is given; it knows no feature (src/main/api.ts chooses them).
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
import { createRefusalHold } from './refusal-hold';
import { requestLogging } from './middleware/logging';
import { requestId } from './middleware/request-id';
import { securityHeaders } from './middleware/security-headers';
import { clientAddressOf } from './client-address';
import { mountRoute, type Route } from './route';
import { createUnauthenticatedBudget, type UnauthenticatedBudget, type UnauthenticatedBudgetSettings } from './unauthenticated-budget';

export interface AppDeps {
  routes: Route[];
  authenticate: Authenticator;
  log: Logger;
  metrics: Metrics;
  removedRoutes: RemovedRoute[];
  /** UNAUTHENTICATED_BODY_*: what the process may hold of bodies not yet authenticated, and how fast they must arrive. */
  unauthenticatedBodies: UnauthenticatedBudgetSettings;
  /** TRUSTED_PROXIES: whose X-Forwarded-For names the client (src/app/http/client-address.ts). */
  trustedProxies: readonly string[];
  /** ADMISSION_REFUSAL_HOLD: how long a refusal of load waits before it is answered (src/app/http/refusal-hold.ts); 0: not at all. */
  refusalHoldMs?: number;
}

export function createApp(deps: AppDeps): Koa<AppState> {
  const app = new Koa<AppState>({ proxy: false });
  // Koa's default error listener prints stacks to stderr; our mapper already logged it.
  app.silent = true;
  const router = new Router<AppState>();
  const unauthenticated = createUnauthenticatedBudget(deps.unauthenticatedBodies, {
    onChange: (held) => deps.metrics.unauthenticatedBytes.set(held),
    onCut: (reason) => deps.metrics.unauthenticatedCuts.inc({ reason }),
  });
  refuseUnadmittableRoutes(deps.routes, unauthenticated);
  const pipeline = { unauthenticated, minBytesPerSecond: deps.unauthenticatedBodies.minBytesPerSecond, metrics: deps.metrics };
  const clientAddress = clientAddressOf(deps.trustedProxies);
  for (const route of deps.routes) mountRoute(router, route, { authenticate: deps.authenticate, metrics: deps.metrics, pipeline });
  for (const removed of deps.removedRoutes) {
    router.all(removed.path.replace(/\{(\w+)\}/g, ':$1'), (ctx) => {
      ctx.state.routeTemplate = removed.path;
      throw errors.gone(`Removed in ${removed.removedIn}.${removed.replacement ? ` Use ${removed.replacement} instead.` : ''}`);
    });
  }

  app.use((ctx, next) => securityHeaders(ctx as AppContext, next));
  app.use((ctx, next) => {
    (ctx as AppContext).state.clientAddress = clientAddress(ctx.req);
    return next();
  });
  app.use((ctx, next) => requestId(ctx as AppContext, next));
  app.use((ctx, next) => requestLogging(ctx as AppContext, next, deps));
  const refusals = createRefusalHold(deps.refusalHoldMs ?? 0);
  app.use((ctx, next) => errorMapper(ctx as AppContext, next, refusals));
  app.use((ctx, next) => methodNotAllowed(ctx as AppContext, next, router));
  app.use(router.routes());
  return app;
}

/**
 * A signed route whose largest body the budget could never admit (its large share, or one
 * address's share) would refuse every such body: refused at start-up instead.
 */
function refuseUnadmittableRoutes(routes: Route[], budget: UnauthenticatedBudget): void {
  for (const route of routes) {
    if (route.auth !== 'signature' || !route.body || route.body.limitBytes <= budget.largestBody()) continue;
    throw new Error(
      `UNAUTHENTICATED_BODY_BUDGET or UNAUTHENTICATED_BODY_PER_ADDRESS: too small for ${route.path}, whose bodies may be ` +
        `${route.body.limitBytes} bytes (one body may hold at most ${budget.largestBody()} bytes of the budget)`,
    );
  }
}

/**
 * A known path asked with a method it does not declare (TRACE, OPTIONS, a typo…) is a 405 with
 * `Allow`, never koa-router's 501: an unknown method is the client's mistake, not ours. The
 * label is the path's template, so no request can add a metric series of its own.
 *
 * A path that is a route of its own (no parameters, e.g. `/v1/automation-runs/claim`) answers
 * with its own methods only, as OpenAPI matches concrete paths before templated ones: it never
 * falls through to a templated route that also matches it (`/v1/automation-runs/{id}`).
 */
async function methodNotAllowed(ctx: AppContext, next: Next, router: Router<AppState>): Promise<void> {
  const layers = router.match(ctx.path, ctx.method).path;
  const concrete = layers.filter((layer) => layer.paramNames.length === 0);
  const owners = concrete.length > 0 ? concrete : layers;
  const allowed = [...new Set(owners.flatMap((layer) => layer.methods))];
  if (concrete.length > 0 && !allowed.includes(ctx.method)) return answer405(ctx, owners, allowed);
  await next();
  if (ctx.status !== 404 || ctx.body !== undefined) return;
  if (allowed.length === 0) return;
  answer405(ctx, owners, allowed);
}

function answer405(ctx: AppContext, layers: { path: string | RegExp }[], allowed: string[]): void {
  ctx.state.routeTemplate ??= String(layers[0]!.path).replace(/:(\w+)/g, '{$1}');
  ctx.status = 405;
  ctx.set('allow', allowed.join(', '));
  ctx.body = { error: 'method_not_allowed', message: `${ctx.method} is not allowed on this path; allowed: ${allowed.join(', ')}.` };
}
