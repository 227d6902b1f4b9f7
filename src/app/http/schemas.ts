/**
 * Response bodies that several routes share, defined once. Each is an OpenAPI component, so
 * the document describes each shape once and every route refers to it by name.
 */
import { z } from './zod';

/** `{ok: true}`: the request was taken, and there is nothing more to say. */
export const OkResponse = z.object({ ok: z.literal(true) }).openapi('OkResponse');

/** Slack webhook rejections (events and slash commands): `{ok:false}`. */
export const OkFalse = z.object({ ok: z.literal(false) }).openapi('WebhookRejected');

/** A 400: one detail per problem, each with its message and path; a detail may carry extra properties. */
export const InvalidRequestError = z
  .object({
    error: z.literal('invalid_request'),
    details: z.array(z.object({ message: z.string(), path: z.array(z.union([z.string(), z.number()])).optional() }).passthrough()),
    capability: z.string().optional(),
  })
  .openapi('InvalidRequestError');

/** `reason` and `message` only for a runner token that was found but no longer works, or that is unknown. */
const Unauthorized = z
  .object({
    error: z.literal('unauthorized'),
    reason: z.enum(['runner_token_expired', 'runner_token_revoked', 'runner_token_unknown']).optional(),
    message: z.string().optional(),
  })
  .openapi('Unauthorized');

const Forbidden = z.object({ error: z.literal('forbidden'), reason: z.string(), message: z.string() }).openapi('Forbidden');

/** A dependency is down: retry later (src/app/errors.ts `errors.unavailable`). */
export const Unavailable = z
  .object({ error: z.literal('unavailable'), dependency: z.string(), message: z.string() })
  .openapi('Unavailable');

/**
 * Admission refused the request, retry after `Retry-After` seconds: `share`, its organization is at
 * its share (src/app/admission.ts); `capacity`, the service holds as many live runs as it may (src/runs/capacity.ts).
 */
const RateLimited = z
  .object({ error: z.literal('rate_limited'), reason: z.enum(['share', 'capacity']), message: z.string() })
  .openapi('RateLimited');

export const PlainText = z.string();

/** The process is flooded: too many unauthenticated bodies held, or credentials waiting to be looked up; retry after `Retry-After` seconds. */
const Busy = z.object({ error: z.literal('busy'), message: z.string() }).openapi('Busy');

/** The 401/403/429/503 rows every authenticated route shares. */
export const authResponses = {
  401: { description: 'No or invalid credentials.', schema: Unauthorized },
  403: {
    description:
      'Authenticated, but not allowed: `admin_required`, `session_required`, or `runner_token` (a runner token opens only the automation-run routes).',
    schema: Forbidden,
  },
  429: {
    description:
      'On routes that hand work to Temporal: the organization is at its share of the service (`reason: share`), or, for a ' +
      'claim or a report that would start a run or an attempt, the service holds as many live runs as it may (`reason: capacity`). ' +
      'Retry after `Retry-After` seconds.',
    schema: RateLimited,
  },
  503: {
    description:
      'Postgres unavailable while checking the credentials (`unavailable`), or the process flooded with credentials it ' +
      'must look up (`busy`): retry after `Retry-After` seconds.',
    schema: z.union([Unavailable, Busy]),
  },
};

/** The 503 of a signed route whose body the process has no room to hold before checking it (src/app/http/unauthenticated-budget.ts). */
export const unauthenticatedBusy = {
  description:
    'The process holds as many unauthenticated request bodies as it may, or as many as one client address may: ' +
    'retry after `Retry-After` seconds.',
  schema: Busy,
};

const RequestTimeout = z.object({ error: z.literal('request_timeout'), message: z.string() }).openapi('RequestTimeout');

/** The 408 of a signed route whose body arrived slower than UNAUTHENTICATED_BODY_MIN_RATE (src/app/http/unauthenticated-budget.ts). */
export const bodyTooSlow = {
  description: 'The body arrived too slowly and was cut off; the connection closes.',
  schema: RequestTimeout,
};
