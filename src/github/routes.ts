/**
 * GitHub App webhooks (spec 4.5, 2.8; issue #6) and the sync-event listing.
 *
 * Order of checks, each answered before the next runs: body within 25 MB (413, in route.ts) →
 * secret configured (503) → signature over the raw bytes (401) → delivery headers (200 not
 * accepted) → JSON (400) → relevance (200 not accepted) → durable start of
 * `github-delivery/{deliveryId}` → 202. GitHub never retries by itself and waits 10 s, so the
 * hot path does no database work: matching targets is the workflow's job.
 */
import { errors } from '../app/errors';
import { defineRoute, type Reply, type Route } from '../app/http/route';
import type { Config } from '../app/config';
import type { IngressGateway } from '../app/ingress';
import type { Metrics } from '../app/metrics';
import type { Db } from '../app/store/db';
import { z } from '../app/http/zod';
import { InvalidRequestError, authResponses } from '../app/http/schemas';
import { githubDeliveryWorkflowId } from './contract';
import { deliverySearchAttributes } from './delivery';
import { githubDelivery } from '../../workflows/github';
import { classifyDelivery, parseWebhookBody, readDeliveryHeaders } from './relevance';
import { SIGNATURE_HEADER, verifyWithFallback } from './signature';
import { REPOSITORY_FULL_NAME, SYNC_STATUSES, listSyncEvents } from './targets';

export const GITHUB_WEBHOOK_PATH = '/v1/webhooks/connectors/github';
export const CODEHOST_WEBHOOK_PATH = '/v1/webhooks/connectors/codehost';
/** GitHub caps payloads at 25 MB; anything larger is not GitHub (behaviour notes). */
export const GITHUB_BODY_LIMIT_BYTES = 25 * 1024 * 1024;

const NotAccepted = z.object({ ok: z.literal(true), accepted: z.literal(false), reason: z.string() }).openapi('GithubWebhookNotAccepted');
const Accepted = z
  .object({
    ok: z.literal(true),
    accepted: z.literal(true),
    event: z.string().openapi({ example: 'push' }),
    deliveryId: z.string(),
    queued: z.literal(true),
  })
  .openapi('GithubWebhookAccepted');
const Rejected = z
  .object({ ok: z.literal(false), error: z.string().openapi({ example: 'invalid signature' }) })
  .openapi('GithubWebhookRejected');

/** What the GitHub routes use, passed in by the composition root (src/app/compose.ts). */
export interface GithubRouteDeps {
  config: Config;
  db: Db;
  ingress: IngressGateway;
  metrics: Metrics;
  now: () => number;
}

export function createGithubRoutes(deps: GithubRouteDeps): Route[] {
  const { config, db, ingress, metrics, now } = deps;

  const webhook = defineRoute({
    method: 'post',
    path: GITHUB_WEBHOOK_PATH,
    aliases: [CODEHOST_WEBHOOK_PATH],
    summary: 'GitHub App webhook: verified deliveries become durable sync work',
    description:
      'Signed with `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>` under GITHUB_WEBHOOK_SECRET ' +
      '(or GITHUB_WEBHOOK_SECRET_PREVIOUS during a rotation). Relevant: `push`; `installation` deleted, suspend, ' +
      'unsuspend; `installation_repositories` added, removed; `repository` renamed, deleted, transferred. ' +
      'Each delivery id starts one workflow; a redelivery gets the same answer and starts nothing.',
    tags: ['Webhooks'],
    auth: 'signature',
    ingress: true,
    body: {
      kind: 'raw',
      limitBytes: GITHUB_BODY_LIMIT_BYTES,
      contentType: 'application/json',
      description: 'The GitHub payload, as sent (JSON, or a form with a `payload` field).',
    },
    responses: {
      200: { description: 'Verified but not accepted (ping, irrelevant event, incomplete push…).', schema: NotAccepted },
      202: { description: 'Accepted: the delivery workflow is durably started (or already was).', schema: Accepted },
      400: { description: 'Signature matched but the body is not a JSON object.', schema: InvalidRequestError },
      401: { description: 'Missing or wrong signature.', schema: Rejected },
      413: { description: 'Body over 25 MB.', schema: z.string(), contentType: 'text/plain' },
      503: {
        description: 'Webhook secret not configured, or Temporal unavailable: retry later.',
        schema: z.object({ ok: z.boolean().optional(), error: z.string() }).passthrough(),
      },
    },
    handler: async ({ rawBody }, ctx) => {
      const log = ctx.state.log;
      const secret = config.github.webhookSecret;
      if (!secret) throw errors.webhook('webhook_secret_not_configured', 503, { error: 'webhook secret not configured' });
      const verified = verifyWithFallback(
        { current: secret, previous: config.github.webhookSecretPrevious },
        rawBody,
        ctx.headers[SIGNATURE_HEADER],
      );
      if (!verified.ok) {
        metrics.signatureFailures.inc({ route: GITHUB_WEBHOOK_PATH, reason: verified.reason });
        log.info({ reason: verified.reason }, 'github webhook signature rejected');
        throw errors.webhook('invalid_signature', 401, { error: 'invalid signature' });
      }
      if (verified.secret === 'previous') log.info('github webhook signed with the previous secret (rotation in progress)');

      const ignored = (reason: string): Reply => ({
        status: 200,
        body: { ok: true, accepted: false, reason },
        outcome: { outcome: 'ineligible', reason },
      });
      const headers = readDeliveryHeaders(ctx.headers);
      if (!headers.ok) return ignored(headers.reason);

      const parsed = parseWebhookBody(rawBody, ctx.request.type);
      if (!parsed.ok) throw errors.invalidRequest([{ message: parsed.message, path: parsed.path }]);
      const delivery = classifyDelivery({ event: headers.event, deliveryId: headers.deliveryId, receivedAt: now() }, parsed.payload);
      if (!delivery.accepted) return ignored(delivery.reason);

      // Started before answering: a 202 means Temporal holds the delivery. The delivery id is
      // the dedupe key, also after the first workflow closed (GitHub redeliveries keep the id).
      const outcome = await ingress.startOnce(githubDelivery, githubDeliveryWorkflowId(delivery.deliveryId), [delivery.input], {
        searchAttributes: deliverySearchAttributes(delivery.input),
      });
      log.info({ deliveryId: delivery.deliveryId, event: delivery.event, outcome }, 'github delivery queued');
      return {
        status: 202,
        body: { ok: true, accepted: true, event: delivery.event, deliveryId: delivery.deliveryId, queued: true },
        outcome: { outcome, reason: delivery.event },
      };
    },
  });

  const SyncEvent = z
    .object({
      id: z.string(),
      deliveryId: z.string(),
      event: z.string(),
      action: z.string().nullable(),
      kind: z.enum(['push', 'full_resync']),
      targetId: z.string().nullable(),
      installationId: z.number().int(),
      repositoryId: z.number().int().nullable(),
      repository: z.string().nullable(),
      ref: z.string().nullable(),
      headSha: z.string().nullable(),
      status: z.enum(SYNC_STATUSES as [string, ...string[]]),
      outcome: z.string().nullable(),
      createdAt: z.string(),
      updatedAt: z.string(),
    })
    .openapi('GithubSyncEvent');

  const syncEvents = defineRoute({
    method: 'get',
    path: '/v1/connectors/github/sync-events',
    summary: "The organization's GitHub sync events, newest first (admins only)",
    description: 'What a sync executor picks up: one event per connected target and head, or a full resync after a rename.',
    tags: ['Connectors'],
    auth: 'admin',
    query: z.object({
      status: z.enum(SYNC_STATUSES as [string, ...string[]]).optional(),
      repo: z.string().regex(REPOSITORY_FULL_NAME, 'must be owner/name').optional(),
      limit: z.coerce.number().int().min(1).max(200).default(50),
    }),
    responses: {
      200: { description: 'Sync events, newest first.', schema: z.object({ events: z.array(SyncEvent) }) },
      400: { description: 'Invalid query.', schema: InvalidRequestError },
      ...authResponses,
    },
    handler: async ({ principal, query }) => {
      const events = await listSyncEvents(db, {
        organizationId: principal.organizationId,
        status: query.status as (typeof SYNC_STATUSES)[number] | undefined,
        repo: query.repo,
        limit: query.limit,
      });
      return { status: 200, body: { events } };
    },
  });

  return [webhook, syncEvents];
}
