import getRawBody from 'raw-body';
import { AppError, errors } from '../errors';
import type { AppContext } from './context';
import type { BodyHold } from './unauthenticated-budget';

/** An unauthenticated body's room in the budget, and the promise that rejects if the budget cuts it off. */
export interface BodyWatch {
  hold: BodyHold;
  cutOff: Promise<never>;
}

/**
 * Reads the exact request bytes, which signature checks need, within the route's limit.
 * Content-Encoding is not decoded: the limit counts the bytes on the wire, and those bytes are
 * what the route parses or verifies. Over the limit → 413 with a plain-text body. The rest of
 * an oversized upload is drained so the client reads our answer instead of a reset connection.
 * A body read under an unauthenticated hold reports its progress to the budget, and stops with
 * the budget's answer (408) if the budget cuts it off; the connection then closes once the
 * answer is written.
 */
export async function readRawBody(ctx: AppContext, limitBytes: number, watch?: BodyWatch): Promise<Buffer> {
  const reading = getRawBody(ctx.req, { limit: limitBytes, length: ctx.request.length });
  // After getRawBody: its own listener is attached first, so no chunk is missed by either.
  if (watch) ctx.req.on('data', (chunk: Buffer) => watch.hold.received(chunk.length));
  try {
    const body = await (watch ? Promise.race([reading, watch.cutOff]) : reading);
    watch?.hold.complete();
    return body;
  } catch (error) {
    if (error instanceof AppError) {
      // Cut off: the read still running ends with the connection; its failure is expected.
      reading.catch(() => undefined);
      ctx.set('connection', 'close');
      throw error;
    }
    throw readFailure(ctx, error, limitBytes);
  }
}

/** What a failed read means for the client, as a coded error. */
function readFailure(ctx: AppContext, error: unknown, limitBytes: number): unknown {
  const e = error as { type?: string; status?: number };
  if (e.type === 'entity.too.large' || e.status === 413) refuseUnread(ctx, errors.payloadTooLarge(limitBytes));
  if (e.type === 'request.size.invalid') {
    return errors.invalidRequest([{ message: 'Request body length does not match Content-Length.' }]);
  }
  // The client went away (aborted upload), or the request belongs to a connection that is
  // already closing (a pipelined request behind `Connection: close`). Nobody will read the
  // answer, but it is the client's doing, not a server error.
  if (e.type === 'request.aborted' || e.type === 'stream.not.readable') {
    return errors.invalidRequest([{ message: 'The request body could not be read: the client closed the connection.' }]);
  }
  if (e.type === 'encoding.unsupported') return errors.invalidRequest([{ message: 'Unsupported content encoding.' }]);
  return error;
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
