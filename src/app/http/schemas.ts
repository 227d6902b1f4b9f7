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

const Unauthorized = z.object({ error: z.literal('unauthorized') }).openapi('Unauthorized');

const Forbidden = z.object({ error: z.literal('forbidden'), reason: z.string(), message: z.string() }).openapi('Forbidden');

/** A dependency is down: retry later (src/app/errors.ts `errors.unavailable`). */
export const Unavailable = z
  .object({ error: z.literal('unavailable'), dependency: z.string(), message: z.string() })
  .openapi('Unavailable');

/** Too many failed authentications from one address (src/app/failure-limit.ts): retry after `Retry-After` seconds. */
const RateLimited = z.object({ error: z.literal('rate_limited'), message: z.string() }).openapi('RateLimited');

/** The same refusal on the signed webhook routes, in their `{ok:false}` shape. */
const WebhookRateLimited = z.object({ ok: z.literal(false), error: z.literal('rate_limited') }).openapi('WebhookRateLimited');

export const PlainText = z.string();

/** The 401/403 rows every authenticated route shares. */
export const authResponses = {
  401: { description: 'No or invalid credentials.', schema: Unauthorized },
  403: { description: 'Authenticated, but not allowed.', schema: Forbidden },
  429: { description: 'Too many failed authentications from this address: retry after `Retry-After` seconds.', schema: RateLimited },
};

/** The 429 every signed webhook route shares. */
export const webhookRateLimited = {
  description: 'Too many failed signatures from this address or for this installation: retry after `Retry-After` seconds.',
  schema: WebhookRateLimited,
};

const Busy = z.object({ error: z.literal('busy'), message: z.string() }).openapi('Busy');

/** The 503 of a signed route whose body the process has no room to hold before checking it (src/app/http/unauthenticated-budget.ts). */
export const unauthenticatedBusy = {
  description: 'The process holds as many unauthenticated request bodies as it may: retry after `Retry-After` seconds.',
  schema: Busy,
};
