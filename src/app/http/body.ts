import getRawBody from 'raw-body';
import { errors } from '../errors';
import type { AppContext } from './context';

/**
 * Reads the exact request bytes, which signature checks need, within the route's limit.
 * Over the limit → 413 with a plain-text body. The rest of an oversized upload is
 * drained so the client reads our answer instead of a reset connection.
 */
export async function readRawBody(ctx: AppContext, limitBytes: number): Promise<Buffer> {
  try {
    return await getRawBody(ctx.req, { limit: limitBytes, length: ctx.request.length });
  } catch (error) {
    const e = error as { type?: string; status?: number };
    if (e.type === 'entity.too.large' || e.status === 413) refuseUnread(ctx, errors.payloadTooLarge(limitBytes));
    if (e.type === 'request.size.invalid') {
      throw errors.invalidRequest([{ message: 'Request body length does not match Content-Length.' }]);
    }
    // The client went away (aborted upload), or the request belongs to a connection that is
    // already closing (a pipelined request behind `Connection: close`). Nobody will read the
    // answer, but it is the client's doing, not a server error.
    if (e.type === 'request.aborted' || e.type === 'stream.not.readable') {
      throw errors.invalidRequest([{ message: 'The request body could not be read: the client closed the connection.' }]);
    }
    if (e.type === 'encoding.unsupported') {
      throw errors.invalidRequest([{ message: 'Unsupported content encoding.' }]);
    }
    throw error;
  }
}

/**
 * Answers without reading the body: the rest of the upload is drained (read and dropped, never
 * held) and the connection closed after the answer, so the client reads it instead of a reset.
 */
export function refuseUnread(ctx: AppContext, error: unknown): never {
  ctx.req.resume();
  ctx.set('connection', 'close');
  throw error;
}
