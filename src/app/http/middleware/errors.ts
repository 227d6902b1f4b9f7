import { createHash } from 'node:crypto';
import type { Next } from 'koa';
import { AppError, errors } from '../../errors';
import type { AppContext } from '../context';
import type { RefusalHold } from '../refusal-hold';

/**
 * The one place errors become responses. AppErrors carry their status and spec body; a
 * dependency outage becomes 503 so senders retry; anything else is a 500 with no stack trace.
 */
export async function errorMapper(ctx: AppContext, next: Next, refusals?: RefusalHold): Promise<void> {
  try {
    await next();
    if (ctx.status === 404 && ctx.body === undefined) {
      throw errors.notFound(`No route for ${ctx.method} ${ctx.path}`);
    }
  } catch (caught) {
    let error: AppError;
    if (caught instanceof AppError) {
      error = caught;
    } else {
      // Dependency outages arrive as AppErrors already, named where they happen
      // (temporalCall, the Postgres pool in store/db.ts): anything else is a bug.
      ctx.state.log?.error({ err: caught }, 'unhandled error');
      error = new AppError('internal', 500, { body: { error: 'internal', message: 'Internal server error.' } });
    }
    // A full unauthenticated budget is load, not a fault: den_unauthenticated_body_refusals_total counts it.
    if (error.status === 503 && error.code !== 'busy' && error.code !== 'overloaded')
      ctx.state.log?.warn({ err: error.cause ?? error }, 'dependency unavailable');
    await refusals?.hold(error, senderOf(ctx));
    ctx.status = error.status;
    for (const [name, value] of Object.entries(error.headers)) ctx.set(name, value);
    if (typeof error.body === 'string') {
      ctx.type = 'text/plain; charset=utf-8';
      ctx.body = error.body;
    } else {
      ctx.body = error.body;
    }
  }
}

/**
 * Who sent a request, for the refusal hold: the route with the credential it carried (hashed, never
 * kept), or, on the signed webhook routes, which carry none, its path (a Slack connection's names
 * the connection; GitHub's, the one App).
 */
function senderOf(ctx: AppContext): string {
  const credential = ctx.get('x-api-key') || ctx.get('authorization');
  const route = ctx.state.routeTemplate ?? ctx.path;
  if (!credential) return `${route}|${ctx.path}`;
  return `${route}|${createHash('sha256').update(credential).digest('base64url').slice(0, 22)}`;
}
