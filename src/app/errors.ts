/**
 * Errors are coded values with a status. Handlers throw them; `src/http/middleware/errors.ts`
 * is the one place that turns them into responses. The bodies are the spec's (§7).
 */
import type { ZodError } from 'zod';

export interface InvalidRequestDetail {
  message: string;
  path?: (string | number)[];
  [extra: string]: unknown;
}

/** A JSON object, or a string that is sent as text/plain (spec 4.1's 413 is plain text). */
export type ErrorBody = Record<string, unknown> | string;

export class AppError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    readonly body: ErrorBody,
    options?: { cause?: unknown; headers?: Record<string, string> },
  ) {
    super(typeof body === 'string' ? body : code, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.headers = options?.headers ?? {};
  }
  readonly headers: Record<string, string>;
}

export function zodDetails(error: ZodError, prefix: (string | number)[] = []): InvalidRequestDetail[] {
  return error.issues.map((issue) => ({
    message: issue.message,
    path: [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
  }));
}

export const errors = {
  invalidRequest: (details: InvalidRequestDetail[]) =>
    new AppError('invalid_request', 400, { error: 'invalid_request', details }),
  invalidRequestFromZod: (error: ZodError, prefix: (string | number)[] = []) =>
    errors.invalidRequest(zodDetails(error, prefix)),
  unauthorized: () => new AppError('unauthorized', 401, { error: 'unauthorized' }),
  forbidden: (reason: string, message: string) => new AppError('forbidden', 403, { error: 'forbidden', reason, message }),
  notFound: (message = 'Not found') => new AppError('not_found', 404, { error: 'not_found', message }),
  conflict: (error: string, extra: Record<string, unknown> = {}) => new AppError(error, 409, { error, ...extra }),
  gone: (message = 'This route belonged to a removed feature.') => new AppError('gone', 410, { error: 'gone', message }),
  payloadTooLarge: (limitBytes: number) =>
    new AppError('payload_too_large', 413, `Payload too large: the limit is ${limitBytes} bytes.`),
  unsupportedMediaType: (expected: string) =>
    new AppError('unsupported_media_type', 415, { error: 'unsupported_media_type', message: `Expected ${expected}.` }),
  /** A dependency is down: the sender should retry, so never a 200 for work that is not durable. */
  unavailable: (dependency: 'temporal' | 'postgres' | string, cause?: unknown) =>
    new AppError(
      'unavailable',
      503,
      { error: 'unavailable', dependency, message: `${dependency} is unavailable; retry later.` },
      { cause, headers: { 'retry-after': '5' } },
    ),
  /** Webhook-shaped failures carry `{ok:false}` bodies (spec 4.1, 4.5, 4.6). */
  webhook: (code: string, status: number, extra: Record<string, unknown> = {}) =>
    new AppError(code, status, { ok: false, ...extra }),
};

/**
 * True for errors that mean "a dependency could not be reached", which are answered 503 so
 * that senders retry. Covers the Temporal client (gRPC UNAVAILABLE / DEADLINE_EXCEEDED, failed
 * connections) and pg (refused connections, pool timeouts, server shutting down).
 */
export function dependencyOf(error: unknown): 'temporal' | 'postgres' | undefined {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const e = current as { name?: string; code?: unknown; message?: string; cause?: unknown };
    const message = e.message ?? '';
    if (e.name === 'ServiceError' || e.name === 'TransportError' || /temporal|grpc/i.test(e.name ?? '')) {
      return 'temporal';
    }
    // gRPC status codes: 4 DEADLINE_EXCEEDED, 14 UNAVAILABLE.
    if ((e.code === 14 || e.code === 4) && /UNAVAILABLE|DEADLINE|connect|No connection/i.test(message)) return 'temporal';
    if (/Failed to connect|connection.*(temporal|7233)|tcp connect error|transport error/i.test(message)) return 'temporal';
    if (
      e.code === 'ECONNREFUSED' ||
      e.code === '57P01' || // admin_shutdown
      e.code === '57P03' || // cannot_connect_now
      e.code === '08006' ||
      e.code === '08001' ||
      /timeout exceeded when trying to connect|Connection terminated|the database system is (starting|shutting)/i.test(
        message,
      )
    ) {
      return 'postgres';
    }
    current = e.cause;
  }
  return undefined;
}
