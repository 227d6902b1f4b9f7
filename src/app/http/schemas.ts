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

export const PlainText = z.string();

/** The 401/403 rows every authenticated route shares. */
export const authResponses = {
  401: { description: 'No or invalid credentials.', schema: Unauthorized },
  403: { description: 'Authenticated, but not allowed.', schema: Forbidden },
};
