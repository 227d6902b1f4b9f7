/**
 * Slack ingress (spec 4.1, 4.6; behaviour notes "Slack events" and "Slack slash commands"),
 * served on the provider paths and on the spec's neutral `chatplatform` paths.
 *
 * The events check order is the contract: id (400) → size (413) → installation (401) →
 * signature (401) → envelope (400) → url_verification (200) → team/app (403) → no event
 * (200) → eligibility (200, not routed) → durable enqueue → 200. The handlers call neither
 * Slack nor a runtime: Slack wants an ack within 3 s, and only the enqueue stands before it.
 */
import { publicBaseUrl } from '../app/config';
import { AppError, errors } from '../app/errors';
import { defineRoute, type Reply, type Route } from '../app/http/route';
import { InvalidRequestError, OkFalse, OkResponse, PlainText } from '../app/http/schemas';
import { z } from '../app/http/zod';
import type { TemporalClientHandle } from '../app/temporal/client';
import type { IngressGateway } from '../app/ingress';
import type { Config } from '../app/config';
import type { Logger } from '../app/log';
import type { Metrics } from '../app/metrics';
import type { SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import { slackEventWorkflowId, slackSearchAttributes, type SlackEventInput } from './contract';
import { slackEvent } from '../../workflows/slack';
import { CONNECTION_ID_PATTERN } from './connections';
import { classifyEvent, type IneligibleReason } from './eligibility';
import { isSslCheck, parseEnvelope, parseSlashCommand } from './envelope';
import { verifiedConnection } from './verify';
import { createLinkToken } from './link-token';
import { completeLink, LINK_REFUSAL_STATUS, type LinkRefusal } from './link-completion';
import { slackQuotaChecks, type SlackQuota } from './quota';
import { connectAccountText, connectLinkUrl, DISABLED_CONNECTION_TEXT } from './texts';

export const EVENTS_BODY_LIMIT = 1_000_000;
export const COMMANDS_BODY_LIMIT = 100_000;

const ConnectionParams = z.object({
  connectionId: z
    .string()
    .length(30)
    .regex(CONNECTION_ID_PATTERN, 'Must be a typeid with prefix emc (emc_ followed by 26 base32 characters).')
    .openapi({ description: 'Slack connection id (spec 2.1).', example: 'emc_01h2xcejqtf2nbrexx3vqjhp41' }),
});

const Challenge = z.object({ challenge: z.string() }).openapi('SlackUrlVerificationChallenge');
const SlashCommandResponse = z.object({ response_type: z.literal('ephemeral'), text: z.string() }).openapi('SlackSlashCommandResponse');

const ok = () => ({ status: 200, body: { ok: true } });

/** What the Slack routes use, passed in by the composition root (src/app/compose.ts). */
export interface SlackRouteDeps {
  config: Config;
  db: Db;
  secretKey: SecretKeys;
  temporal: TemporalClientHandle;
  ingress: IngressGateway;
  metrics: Metrics;
  log: Logger;
  now: () => number;
  /** Shared by every replica (Postgres); built by the feature factory. */
  quota: SlackQuota;
}

export function createSlackRoutes(deps: SlackRouteDeps): Route[] {
  const { config, db, secretKey, temporal, ingress, metrics, now, quota } = deps;
  const verifyDeps = { db, secretKey, metrics, now };

  const events = defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/{connectionId}/events',
    aliases: ['/v1/integrations/chatplatform/{connectionId}/events'],
    summary: 'Slack Events API request URL: verified, then durably enqueued before the ack.',
    description:
      "Signed with the connection's signing secret (`X-Slack-Signature`, `X-Slack-Request-Timestamp`, ±300 s). " +
      'Supported events start workflow `slack-event/{connectionId}/{event_id}` before the 200; a retry of the same ' +
      '`event_id` is acknowledged without a second workflow. Ineligible or disabled events are acknowledged and not routed.',
    tags: ['Slack'],
    auth: 'signature',
    ingress: true,
    params: ConnectionParams,
    body: { kind: 'raw', limitBytes: EVENTS_BODY_LIMIT, contentType: 'application/json', description: 'The Events API envelope.' },
    responses: {
      200: { description: '`OkResponse`, or `{challenge}` for url_verification.', schema: z.union([OkResponse, Challenge]) },
      400: { description: 'Invalid connection id or payload.', schema: z.union([InvalidRequestError, OkFalse]) },
      401: { description: 'No such installation, or the signature is invalid.', schema: OkFalse },
      403: { description: 'team_id or api_app_id differs from the installation.', schema: OkFalse },
      413: { description: 'Body over 1,000,000 bytes.', schema: PlainText, contentType: 'text/plain' },
      503: { description: 'Temporal could not take the event in time, or Postgres could not count it against the quotas; Slack retries.' },
    },
    handler: async ({ params, rawBody }, ctx) => {
      const log = ctx.state.log;
      const connection = await verifiedConnection(verifyDeps, ctx, params.connectionId, rawBody);

      const parsed = parseEnvelope(rawBody);
      if (!parsed.ok) throw errors.invalidRequest(parsed.details);
      const envelope = parsed.envelope;
      if (envelope.kind === 'url_verification') {
        return { ...ok(), body: { challenge: envelope.challenge }, outcome: { outcome: 'acknowledged', reason: 'url_verification' } };
      }
      if (envelope.teamId !== connection.teamId || envelope.apiAppId !== connection.apiAppId) {
        throw errors.webhook('installation_mismatch', 403);
      }
      if (!envelope.event || !envelope.eventId) return { ...ok(), outcome: { outcome: 'acknowledged', reason: 'no_event' } };

      const eventId = envelope.eventId;
      const notRouted = (reason: IneligibleReason): Reply => {
        log.debug({ connectionId: connection.id, eventId, eventType: envelope.event?.type, reason }, 'slack event not routed');
        return { ...ok(), outcome: { outcome: 'ineligible', reason } };
      };
      const classified = classifyEvent(envelope.event, connection);
      if (classified.route === 'ignore') return notRouted(classified.reason);

      const input: SlackEventInput = {
        connectionId: connection.id,
        organizationId: connection.organizationId,
        teamId: connection.teamId,
        eventId,
        receivedAt: now(),
        settings: {
          linkWaitMs: config.slack.linkWaitMs,
          memberDailyInvocations: config.slack.memberDailyInvocations,
          memberConcurrentRuns: config.slack.memberConcurrentRuns,
          run: { ...config.runs },
        },
        ...(classified.route === 'lifecycle' ? { lifecycle: { type: classified.type } } : { invocation: classified.invocation }),
      };

      // Quota applies to invocations only: lifecycle events must always get through.
      let release: (() => Promise<void>) | undefined;
      if (input.invocation) {
        const verdict = await quota.tryTake(slackQuotaChecks(config, connection.teamId, input.invocation.user), now());
        if (!verdict.ok) return notRouted(verdict.key.startsWith('workspace:') ? 'workspace_quota' : 'user_quota');
        release = verdict.release;
      }

      let outcome;
      try {
        outcome = await ingress.startOnce(slackEvent, slackEventWorkflowId(input.connectionId, input.eventId), [input], {
          searchAttributes: [
            { key: slackSearchAttributes.ConnectionId, value: input.connectionId },
            { key: slackSearchAttributes.SlackEventStatus, value: 'received' },
            ...(input.invocation ? [{ key: slackSearchAttributes.SlackUserId, value: input.invocation.user }] : []),
          ],
        });
      } catch (error) {
        await release?.();
        throw error;
      }
      // A duplicate was counted against the quota by its first delivery already.
      if (outcome !== 'enqueued') await release?.();
      const retry = { retryNum: ctx.get('x-slack-retry-num') || undefined, retryReason: ctx.get('x-slack-retry-reason') || undefined };
      log.debug({ connectionId: connection.id, eventId, outcome, ...retry }, 'slack event acknowledged');
      return { ...ok(), outcome: { outcome, reason: input.lifecycle ? input.lifecycle.type : input.invocation!.type } };
    },
  });

  const commands = defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/{connectionId}/commands',
    aliases: ['/v1/integrations/chatplatform/{connectionId}/commands'],
    summary: 'Slack slash command request URL: answers with an ephemeral connect-your-account link.',
    description:
      'Form-encoded and signed like events. The reply carries `<{APP_BASE_URL}/connect/slack?token=…|Connect your account>`; ' +
      'the token binds the connection, the workspace and the Slack user, expires in SLACK_LINK_TOKEN_TTL (10 min) and works once. ' +
      'Answered without Temporal.',
    tags: ['Slack'],
    auth: 'signature',
    ingress: true,
    params: ConnectionParams,
    body: {
      kind: 'raw',
      limitBytes: COMMANDS_BODY_LIMIT,
      contentType: 'application/x-www-form-urlencoded',
      description: 'The slash command form (team_id, api_app_id, user_id, command, …).',
    },
    responses: {
      200: {
        description: 'Ephemeral reply with the connect link (spec 2.9); an empty body for `ssl_check=1`.',
        schema: z.union([SlashCommandResponse, z.literal('')]),
      },
      400: { description: 'Invalid connection id or form.', schema: InvalidRequestError },
      401: { description: 'No such installation, or the signature is invalid.', schema: OkFalse },
      403: { description: 'team_id or api_app_id differs from the installation, or api_app_id is missing.', schema: OkFalse },
      413: { description: 'Body over 100,000 bytes.', schema: PlainText, contentType: 'text/plain' },
    },
    handler: async ({ params, rawBody }, ctx) => {
      const connection = await verifiedConnection(verifyDeps, ctx, params.connectionId, rawBody);
      // Slack checks the request URL's certificate with a signed `ssl_check=1` that has no team or
      // user: answered 200 with an empty body before any other command check.
      if (isSslCheck(rawBody)) return { status: 200, body: '', outcome: { outcome: 'acknowledged', reason: 'ssl_check' } };
      const parsed = parseSlashCommand(rawBody);
      if (!parsed.ok) throw errors.invalidRequest(parsed.details);
      const command = parsed.command;
      // A command must name this installation's workspace and app: a missing api_app_id fails the
      // check like a wrong one (it cannot prove which app it was meant for).
      if (command.teamId !== connection.teamId || command.apiAppId !== connection.apiAppId) {
        throw errors.webhook('installation_mismatch', 403);
      }
      if (!connection.enabled) {
        return {
          status: 200,
          body: { response_type: 'ephemeral', text: DISABLED_CONNECTION_TEXT },
          outcome: { outcome: 'ineligible', reason: 'connection_disabled' },
        };
      }
      const { token } = createLinkToken(secretKey, {
        connectionId: connection.id,
        teamId: connection.teamId,
        slackUserId: command.userId,
        now: now(),
        ttlMs: config.slack.linkTokenTtlMs,
      });
      const url = connectLinkUrl(publicBaseUrl(config), token);
      return {
        status: 200,
        body: { response_type: 'ephemeral', text: connectAccountText(url, config.slack.linkTokenTtlMs) },
        outcome: { outcome: 'acknowledged', reason: 'connect_link' },
      };
    },
  });

  /** The route's answer to each refusal; the codes' statuses are defined with completeLink. */
  function linkRefusal(error: LinkRefusal): AppError {
    if (LINK_REFUSAL_STATUS[error] === 404) return errors.notFound('No such Slack connection.');
    return new AppError(error, LINK_REFUSAL_STATUS[error], { error });
  }

  const LinkBody = z.object({ token: z.string().max(4096) }).openapi('SlackAccountLinkRequest');
  const LinkCreated = z.object({ slackUserId: z.string(), memberId: z.string() }).openapi('SlackAccountLink');
  const LinkError = z.object({ error: z.string() });

  const accountLinks = defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/{connectionId}/account-links',
    summary: "Completes a connect link: the token's Slack user becomes the calling member.",
    description:
      "Called by the page behind the slash command's link, as the signed-in member. Invocations of that Slack user " +
      'that are waiting for the link continue at once.',
    tags: ['Slack'],
    auth: 'authenticated',
    params: ConnectionParams,
    body: { kind: 'json', schema: LinkBody, limitBytes: 16_384 },
    responses: {
      201: { description: 'Linked.', schema: LinkCreated },
      400: {
        description: '`{error:"invalid_link"}` for a forged or malformed token; InvalidRequestError for a bad body.',
        schema: LinkError,
      },
      401: { description: 'Not authenticated.', schema: LinkError },
      404: { description: "No such connection in the caller's organization (another organization's answers the same).", schema: LinkError },
      409: {
        description: '`link_used` (token already redeemed) or `already_linked` (the Slack user is linked to another member).',
        schema: LinkError,
      },
      410: { description: '`link_expired`.', schema: LinkError },
      503: { description: 'Postgres or Temporal unavailable; nothing was recorded, retry.' },
    },
    handler: async ({ params, body, principal }, ctx) => {
      const outcome = await completeLink(
        { db, secretKey, temporal, startTimeoutMs: config.temporal.startTimeoutMs, metrics, now },
        { token: body.token, connectionId: params.connectionId, organizationId: principal.organizationId, memberId: principal.memberId },
      );
      if (!outcome.ok) throw linkRefusal(outcome.error);
      ctx.state.log.info(
        { connectionId: outcome.connectionId, memberId: outcome.memberId, resumed: outcome.resumed },
        'slack account linked',
      );
      return { status: 201, body: { slackUserId: outcome.slackUserId, memberId: outcome.memberId } };
    },
  });

  return [events, commands, accountLinks];
}
