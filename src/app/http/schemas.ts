/**
 * Response bodies the spec shares across routes, defined once (spec §2.2, §2.3, §7). Each is
 * an OpenAPI component, so the document names them the way the spec does.
 */
import { z } from './zod';

/** Spec 2.2. */
export const OkResponse = z.object({ ok: z.literal(true) }).openapi('OkResponse');

/** Webhook rejections (spec 4.1, 4.6): `{ok:false}`. */
export const OkFalse = z.object({ ok: z.literal(false) }).openapi('WebhookRejected');

/** Spec 2.3: extra properties on a detail are allowed. */
export const InvalidRequestError = z
  .object({
    error: z.literal('invalid_request'),
    details: z.array(z.object({ message: z.string(), path: z.array(z.union([z.string(), z.number()])).optional() }).passthrough()),
    capability: z.string().optional(),
  })
  .openapi('InvalidRequestError');

export const Unauthorized = z.object({ error: z.literal('unauthorized') }).openapi('Unauthorized');

export const Forbidden = z.object({ error: z.literal('forbidden'), reason: z.string(), message: z.string() }).openapi('Forbidden');

/** A dependency is down: retry later (src/errors.ts `errors.unavailable`). */
export const Unavailable = z
  .object({ error: z.literal('unavailable'), dependency: z.string(), message: z.string() })
  .openapi('Unavailable');

export const PlainText = z.string();

/** The 401/403 rows every authenticated route shares. */
export const authResponses = {
  401: { description: 'No or invalid credentials.', schema: Unauthorized },
  403: { description: 'Authenticated, but not allowed.', schema: Forbidden },
};
