/**
 * POST /v1/webhooks/connectors/github (and the `codehost` alias): GitHub App webhooks.
 *
 * Order of checks, each answered before the next runs: declared body within 25 MB (413, in
 * src/app/http/route.ts) → secret configured (503) → a signature header of the right shape (401)
 * → room in the process's budget for unauthenticated bodies (503, in route.ts) → the body read
 * within 25 MB, at the budget's minimum rate (413, 408) → signature over the raw bytes (401) →
 * delivery headers (200 not accepted) → JSON (400) → relevance (200 not accepted) → a push no
 * active target takes (200 not accepted, `no matching target`, from the per-process resolver,
 * src/github/tenant.ts, only when it can vouch for its answer) → an `installation_repositories`
 * or `repository` delivery that touches no target (the same answer, its repositories recorded
 * first: src/github/untracked.ts) → the body's digest (a replay under a new delivery id: 202,
 * nothing started) → the organization's admission (503 `overloaded` with Retry-After) → durable
 * start of `github-delivery/{deliveryId}` → 202. GitHub never retries by itself (the reconcile
 * asks it again for failed deliveries) and waits 10 s, so a push's path does one database write, the
 * digest, and reads through caches; recording the work per target is the workflow's job.
 */
import { AppError, errors } from '../../app/errors';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import type { Tenancy } from '../../app/ingress';
import type { Logger } from '../../app/log';
import type { Db } from '../../app/store/db';
import { githubDeliveryWorkflow, githubDeliveryWorkflowId } from '../contract';
import { deliverySearchAttributes } from '../delivery';
import { bodyDigest, claimDigest } from '../digests';
import { classifyDelivery, IGNORED, parseWebhookBody, readDeliveryHeaders } from '../relevance';
import { answeredUntracked } from '../untracked';
import { SIGNATURE_HEADER, signatureHeaderFailure, verifyWithFallback } from '../signature';
import type { GithubRouteDeps } from './shared';

const GITHUB_WEBHOOK_PATH = '/v1/webhooks/connectors/github';
const CODEHOST_WEBHOOK_PATH = '/v1/webhooks/connectors/codehost';
/** GitHub caps payloads at 25 MB; anything larger is not GitHub. */
const GITHUB_BODY_LIMIT_BYTES = 25 * 1024 * 1024;

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

type WebhookDeps = Pick<GithubRouteDeps, 'settings' | 'db' | 'ingress' | 'metrics' | 'now' | 'resolver'>;

/**
 * The checks that need no body, run before it is read: 503 without a secret, 401 for a signature
 * header that cannot be a signature. Nothing here refuses a request for what other requests did:
 * GitHub has one secret, so a forgery costs one HMAC over a body the budget holds, and a correctly
 * signed delivery always gets through, whatever its address sent before.
 */
function admitDelivery(deps: Pick<GithubRouteDeps, 'settings' | 'metrics'>, ctx: AppContext): void {
  if (!deps.settings.webhookSecret)
    throw errors.webhook('webhook_secret_not_configured', 503, { fields: { error: 'webhook secret not configured' } });
  const failure = signatureHeaderFailure(ctx.headers[SIGNATURE_HEADER]);
  if (failure) rejectSignature(deps, ctx, failure);
}

function rejectSignature(deps: Pick<GithubRouteDeps, 'metrics'>, ctx: AppContext, reason: string): never {
  deps.metrics.authFailures.inc({ surface: 'github', outcome: 'rejected' });
  deps.metrics.signatureFailures.inc({ route: GITHUB_WEBHOOK_PATH, reason });
  ctx.state.log.info({ reason }, 'github webhook signature rejected');
  throw errors.webhook('invalid_signature', 401, { fields: { error: 'invalid signature' } });
}

/** 401 unless the current or the previous secret signed the raw body (admitDelivery ran before it was read). */
function verifyDeliverySignature(deps: Pick<GithubRouteDeps, 'settings' | 'metrics'>, ctx: AppContext, rawBody: Buffer): void {
  const { settings } = deps;
  const secrets = { current: settings.webhookSecret!, previous: settings.webhookSecretPrevious };
  const verified = verifyWithFallback(secrets, rawBody, ctx.headers[SIGNATURE_HEADER]);
  if (!verified.ok) rejectSignature(deps, ctx, verified.reason);
  if (verified.secret === 'previous') ctx.state.log.info('github webhook signed with the previous secret (rotation in progress)');
}

/** A verified delivery that starts no sync work: 200 with the reason. */
const ignored = (reason: string): Reply => ({
  status: 200,
  body: { ok: true, accepted: false, reason },
  outcome: { outcome: 'ineligible', reason },
});

/** The 202 of an accepted delivery, whether this request started its workflow or not. */
const accept = (event: string, deliveryId: string) => ({
  status: 202,
  body: { ok: true, accepted: true, event, deliveryId, queued: true },
});

async function postWebhook(deps: WebhookDeps, ctx: AppContext, rawBody: Buffer): Promise<Reply> {
  const { db, ingress, now } = deps;
  const log = ctx.state.log;
  verifyDeliverySignature(deps, ctx, rawBody);

  const headers = readDeliveryHeaders(ctx.headers);
  if (!headers.ok) return ignored(headers.reason);

  const parsed = parseWebhookBody(rawBody, ctx.request.type);
  if (!parsed.ok) throw errors.invalidRequest([{ message: parsed.message, path: parsed.path }]);
  const delivery = classifyDelivery({ event: headers.event, deliveryId: headers.deliveryId, receivedAt: now() }, parsed.payload);
  if (!delivery.accepted) return ignored(delivery.reason);
  // The spec records relevant deliveries as queued work: a push no target takes is not one.
  if (
    delivery.input.event === 'push' &&
    (await deps.resolver.pushTargets({ ...delivery.input, defaultBranch: delivery.input.defaultBranch ?? null })) === 'none'
  ) {
    return ignored(IGNORED.noMatchingTarget);
  }
  // An installation's repositories or a repository's change that no target follows is not sync work either.
  if (
    (delivery.input.event === 'installation_repositories' || delivery.input.event === 'repository') &&
    (await answeredUntracked(db, delivery.input))
  ) {
    log.info({ deliveryId: delivery.deliveryId, event: delivery.event }, 'github delivery touches no target; recorded, nothing started');
    return ignored(IGNORED.noMatchingTarget);
  }
  const accepted = accept(delivery.event, delivery.deliveryId);

  // The digest is a Postgres row written before the start, not the workflow id, so the delivery
  // id stays the workflow's key: a 202 still waits for Temporal, and after a 503 the same id
  // passes the digest again and starts its workflow.
  const digest = {
    installationId: delivery.input.installationId,
    digest: bodyDigest(rawBody),
    deliveryId: delivery.deliveryId,
    now: now(),
  };
  // A delivery GitHub logged as failed is asked for again by the reconcile (src/github/reconcile-deliveries.ts),
  // so an organization past its share is answered like any outage rather than made to wait.
  const tenancy: Tenancy = {
    tenant: await deps.resolver.tenantOf(delivery.input.installationId),
    admission: 'shed',
    shedAs: { webhook: { error: 'overloaded' } },
  };
  // A share known spent is refused before the digest's Postgres write.
  ingress.shedIfSpent(tenancy);
  if (!(await firstCarrier(db, digest, log))) {
    log.info({ deliveryId: delivery.deliveryId, event: delivery.event }, 'github body replayed under a new delivery id; nothing started');
    return { ...accepted, outcome: { outcome: 'duplicate', reason: delivery.event } };
  }

  // Started before answering: a 202 means Temporal holds the delivery. The delivery id is
  // the dedupe key, also after the first workflow closed (GitHub redeliveries keep the id).
  const outcome = await ingress.start({
    workflow: githubDeliveryWorkflow,
    id: githubDeliveryWorkflowId(delivery.deliveryId),
    args: [delivery.input],
    tenancy,
    searchAttributes: deliverySearchAttributes(delivery.input),
  });
  log.info({ deliveryId: delivery.deliveryId, event: delivery.event, outcome }, 'github delivery queued');
  return { ...accepted, outcome: { outcome, reason: delivery.event } };
}

/**
 * Whether this delivery id is the first to carry its body. GitHub never redelivers by itself, so
 * a delivery must not wait on Postgres: while Postgres cannot take the digest, the replay check is
 * skipped (the delivery id still dedupes) and the delivery goes on to Temporal, which holds it.
 */
async function firstCarrier(db: Db, digest: Parameters<typeof claimDigest>[1], log: Logger): Promise<boolean> {
  try {
    return await claimDigest(db, digest);
  } catch (error) {
    if (!(error instanceof AppError && error.dependency === 'postgres')) throw error;
    log.warn({ deliveryId: digest.deliveryId }, 'github body digest not recorded (postgres unavailable); replay check skipped');
    return true;
  }
}

export function createWebhookRoute(deps: WebhookDeps): Route {
  return defineRoute({
    method: 'post',
    path: GITHUB_WEBHOOK_PATH,
    aliases: [CODEHOST_WEBHOOK_PATH],
    summary: 'GitHub App webhook: verified deliveries become durable sync work',
    description:
      'Signed with `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>` under GITHUB_WEBHOOK_SECRET ' +
      '(or GITHUB_WEBHOOK_SECRET_PREVIOUS during a rotation). Relevant: `push`; `installation` deleted, suspend, ' +
      'unsuspend; `installation_repositories` added, removed; `repository` renamed, deleted, transferred. ' +
      'Each delivery id starts one workflow; a redelivery gets the same answer and starts nothing, and so does ' +
      'the same body under another delivery id (a replay: GitHub does not sign the id).',
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
      200: {
        description: 'Verified but not accepted (ping, irrelevant event, incomplete push, a push no active target takes…).',
        schema: NotAccepted,
      },
      202: { description: 'Accepted: the delivery workflow is durably started (or already was).', schema: Accepted },
      400: { description: 'Signature matched but the body is not a JSON object.', schema: InvalidRequestError },
      401: { description: 'Missing or wrong signature.', schema: Rejected },
      413: { description: 'Body over 25 MB.', schema: z.string(), contentType: 'text/plain' },
      503: {
        description:
          'Webhook secret not configured, Temporal or Postgres unavailable, the process holds as many ' +
          'unauthenticated bodies as it may (`busy`, with `Retry-After`), or the organization is past its share ' +
          '(`overloaded`, with `Retry-After`): retry later. The reconcile asks GitHub again for deliveries it logged as failed.',
        schema: z.object({ ok: z.boolean().optional(), error: z.string() }).passthrough(),
      },
    },
    beforeBody: (_input, ctx) => admitDelivery(deps, ctx),
    handler: ({ rawBody }, ctx) => postWebhook(deps, ctx, rawBody),
  });
}
