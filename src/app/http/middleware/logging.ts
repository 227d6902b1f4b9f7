import type { Next } from 'koa';
import type { Logger } from '../../log';
import type { Metrics } from '../../metrics';
import type { AppContext } from '../context';

/**
 * One JSON line per request: request id, route template, status, latency, organization when
 * known. Headers only at debug level, through pino's redaction (src/app/log.ts); bodies never whole.
 */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

export async function requestLogging(ctx: AppContext, next: Next, deps: { log: Logger; metrics: Metrics }): Promise<void> {
  const started = process.hrtime.bigint();
  ctx.state.log = deps.log.child({ requestId: ctx.state.requestId });
  try {
    await next();
  } finally {
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    // Bounded labels: a route template or `unmatched`, a known method or `other`, a status.
    const route = ctx.state.routeTemplate ?? 'unmatched';
    const method = KNOWN_METHODS.has(ctx.method) ? ctx.method : 'other';
    deps.metrics.httpDuration.observe({ route, method, status: String(ctx.status) }, seconds);
    const line: Record<string, unknown> = {
      method: ctx.method,
      route,
      status: ctx.status,
      latencyMs: Math.round(seconds * 1e6) / 1e3,
      organizationId: ctx.state.principal?.organizationId,
    };
    // Headers only at debug; credentials in them are censored by the logger's redact paths.
    if (ctx.state.log.isLevelEnabled('debug')) line.req = { headers: ctx.headers };
    ctx.state.log.info(line, 'request');
  }
}
