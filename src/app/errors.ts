/**
 * Errors are coded values with a status. Handlers throw them; `src/app/http/middleware/errors.ts`
 * is the one place that turns them into responses. A JSON body names the error in `error`
 * (`{error: 'not_found', message}`); webhook failures are `{ok:false}` instead.
 */
import type { ZodError } from 'zod';

export interface InvalidRequestDetail {
  message: string;
  path?: (string | number)[];
  [extra: string]: unknown;
}

/** A JSON object, or a string that is sent as text/plain (a 413 for a body over the route's limit is plain text). */
export type ErrorReplyBody = Record<string, unknown> | string;

/** What an AppError answers with: its body, any headers, and what caused it. */
export interface AppErrorReply {
  body: ErrorReplyBody;
  headers?: Record<string, string>;
  dependency?: Dependency;
  cause?: unknown;
}

export class AppError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    { body, headers, dependency, cause }: AppErrorReply,
  ) {
    super(typeof body === 'string' ? body : code, cause === undefined ? undefined : { cause });
    this.name = 'AppError';
    this.body = body;
    this.headers = headers ?? {};
    this.dependency = dependency;
  }
  readonly body: ErrorReplyBody;
  readonly headers: Record<string, string>;
  /** Set on 503s: which dependency could not take the request (named at its boundary, never guessed). */
  readonly dependency: Dependency | undefined;
}

/** What a 503 (retry later) names: a service that is down, or a secret key that cannot open a stored secret. */
export type Dependency = 'temporal' | 'postgres' | 'secret_key';

function zodDetails(error: ZodError, prefix: (string | number)[] = []): InvalidRequestDetail[] {
  return error.issues.map((issue) => ({
    message: issue.message,
    path: [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
  }));
}

/** What a webhook failure adds to its `{ok:false}` body, and the headers it answers with. */
export interface WebhookFailure {
  fields?: Record<string, unknown>;
  headers?: Record<string, string>;
}

export const errors = {
  invalidRequest: (details: InvalidRequestDetail[]) =>
    new AppError('invalid_request', 400, { body: { error: 'invalid_request', details } }),
  invalidRequestFromZod: (error: ZodError, prefix: (string | number)[] = []) => errors.invalidRequest(zodDetails(error, prefix)),
  /** `reason` and `message` when the credential was found but no longer works (an expired or revoked runner token). */
  unauthorized: (reason?: string, message?: string) =>
    new AppError('unauthorized', 401, { body: { error: 'unauthorized', ...(reason === undefined ? {} : { reason, message }) } }),
  forbidden: (reason: string, message: string) => new AppError('forbidden', 403, { body: { error: 'forbidden', reason, message } }),
  notFound: (message = 'Not found') => new AppError('not_found', 404, { body: { error: 'not_found', message } }),
  conflict: (error: string, extra: Record<string, unknown> = {}) => new AppError(error, 409, { body: { error, ...extra } }),
  gone: (message = 'This route belonged to a removed feature.') => new AppError('gone', 410, { body: { error: 'gone', message } }),
  payloadTooLarge: (limitBytes: number) =>
    new AppError('payload_too_large', 413, { body: `Payload too large: the limit is ${limitBytes} bytes.` }),
  unsupportedMediaType: (expected: string) =>
    new AppError('unsupported_media_type', 415, { body: { error: 'unsupported_media_type', message: `Expected ${expected}.` } }),
  /** A dependency is down: the sender should retry, so never a 200 for work that is not durable. */
  unavailable: (dependency: 'temporal' | 'postgres', cause?: unknown) =>
    new AppError('unavailable', 503, {
      body: { error: 'unavailable', dependency, message: `${dependency} is unavailable; retry later.` },
      headers: { 'retry-after': '5' },
      dependency,
      cause,
    }),
  /**
   * The process holds as many unauthenticated request bodies as it may (src/app/http/unauthenticated-budget.ts):
   * not an outage, but the sender should retry soon, and a webhook sender does on a 503.
   */
  unauthenticatedBudgetFull: () =>
    new AppError('busy', 503, {
      body: { error: 'busy', message: 'Too many unauthenticated request bodies in flight; retry later.' },
      headers: { 'retry-after': '1' },
    }),
  /** An unauthenticated body arrived slower than the minimum rate and was cut off (src/app/http/unauthenticated-budget.ts). */
  bodyTooSlow: (minBytesPerSecond: number) =>
    new AppError('body_too_slow', 408, {
      body: {
        error: 'request_timeout',
        message: `The request body arrived slower than ${minBytesPerSecond} bytes a second and was cut off.`,
      },
    }),
  /**
   * Too many lookups of credentials or ids this process has not seen are waiting (src/app/batched-lookup.ts):
   * the process is flooded with unverifiable requests, not out of order; the sender should retry soon.
   */
  lookupsBusy: () =>
    new AppError('busy', 503, {
      body: { error: 'busy', message: 'Too many requests are waiting to have their credentials looked up; retry later.' },
      headers: { 'retry-after': '1' },
    }),
  /** Admission refused the request: its organization is at its share (src/app/admission.ts); retry after the window. */
  shed: (retryAfterSeconds: number) =>
    new AppError('shed', 429, {
      body: {
        error: 'rate_limited',
        reason: 'share',
        message: `This organization is at its share of the service; retry in ${retryAfterSeconds} s.`,
      },
      headers: { 'retry-after': String(retryAfterSeconds) },
    }),
  /** The service holds as many live runs as it may (RUN_CAPACITY, src/runs/capacity.ts): a new run or attempt waits for room. */
  capacity: (retryAfterSeconds: number) =>
    new AppError('capacity', 429, {
      body: {
        error: 'rate_limited',
        reason: 'capacity',
        message: `The service holds as many live runs as it can; retry in ${retryAfterSeconds} s.`,
      },
      headers: { 'retry-after': String(retryAfterSeconds) },
    }),
  /** Webhook-shaped failures carry `{ok:false}` bodies; the Slack and GitHub webhook routes use them. */
  webhook: (code: string, status: number, { fields = {}, headers }: WebhookFailure = {}) =>
    new AppError(code, status, { body: { ok: false, ...fields }, headers }),
};
