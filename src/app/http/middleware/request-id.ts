import { randomUUID } from 'node:crypto';
import type { Next } from 'koa';
import type { AppContext } from '../context';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Honour a well-formed incoming x-request-id (from a proxy), else mint one; echo it back. */
export async function requestId(ctx: AppContext, next: Next): Promise<void> {
  const incoming = ctx.get('x-request-id');
  const id = SAFE_ID.test(incoming) ? incoming : randomUUID();
  ctx.state.requestId = id;
  ctx.set('x-request-id', id);
  await next();
}
