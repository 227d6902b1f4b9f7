/**
 * POST /v1/integrations/slack/{connectionId}/events (and the `chatplatform` alias): the Events
 * API request URL.
 *
 * The check order is the contract: id (400) → size (413) → installation (401) → signature (401)
 * → envelope (400) → url_verification (200) → team/app (403: src/slack/ownership.ts, a shared
 * channel's event included) → app_rate_limited (recorded, 200) → no event (200) → eligibility, or
 * the conversation's routing of channel messages and surfaces (200, not routed) → durable enqueue
 * (the workflow started, or the event kept in Postgres when Temporal is slow or down) → 200. The
 * handler calls neither Slack nor a runtime: Slack wants an ack within 3 s, and only the enqueue
 * stands before it.
 */
import { errors } from '../../app/errors';
import type { AppContext } from '../../app/http/context';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, OkFalse, OkResponse, PlainText } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { recordEventsRateLimited, type SlackConnection } from '../connections';
import { isConnectionsEvent } from '../ownership';
import { slackEventWorkflowId, slackMessageWorkflowId, type SlackEventInput } from '../contract';
import type { ConversationIgnoreReason } from '../conversation';
import { startOrDefer, type TakenOutcome } from '../deferred-events';
import { classifyEvent, type EventClassification, type IneligibleReason } from '../eligibility';
import type { SlackEventPayload } from '../event-payloads';
import type { ConversationRoute } from '../thread-routing';
import { parseEnvelope } from '../envelope';
import { slackQuotaChecks } from '../quota';
import type { SlackSettings } from '../settings';
import type { SignedBody } from '../verify';
import { ConnectionParams, ok, type SlackRouteDeps } from './shared';

const EVENTS_BODY_LIMIT = 1_000_000;

const Challenge = z.object({ challenge: z.string() }).openapi('SlackUrlVerificationChallenge');

type EventsDeps = Pick<
  SlackRouteDeps,
  'settings' | 'db' | 'secretKey' | 'ingress' | 'metrics' | 'now' | 'verifier' | 'quota' | 'threads' | 'log'
>;

/** An event that is routed: a lifecycle event, an invocation, or a surface the conversation routes (src/slack/thread-routing.ts). */
type Routed = Exclude<EventClassification, { route: 'ignore' }> | Extract<ConversationRoute, { undo: unknown }>['classified'];

/** Why an event was acknowledged and not routed. */
type NotRoutedReason = IneligibleReason | ConversationIgnoreReason;

/** A verified callback that carries an event, or the answer to a request that carries none. */
type ReadEvent = { reply: Reply } | { connection: SlackConnection; teamId: string; event: SlackEventPayload; eventId: string };

/** The checks up to "no event": installation, signature, envelope, url_verification, team/app. */
async function readEvent(deps: EventsDeps, ctx: AppContext, { connectionId, rawBody }: SignedBody): Promise<ReadEvent> {
  const connection = await deps.verifier.verifiedConnection(ctx, connectionId, rawBody);

  const parsed = parseEnvelope(rawBody);
  if (!parsed.ok) throw errors.invalidRequest(parsed.details);
  const envelope = parsed.envelope;
  if (envelope.kind === 'url_verification') {
    return {
      reply: { ...ok(), body: { challenge: envelope.challenge }, outcome: { outcome: 'acknowledged', reason: 'url_verification' } },
    };
  }
  // A draft not installed yet has no workspace: only its url_verification is answered.
  const teamId = connection.teamId;
  if (teamId === null || !isConnectionsEvent({ ...connection, teamId }, envelope)) throw errors.webhook('installation_mismatch', 403);
  if (envelope.type === 'app_rate_limited') {
    return { reply: await rateLimitedReply(deps, ctx, { connectionId: connection.id, minute: envelope.minuteRateLimited }) };
  }
  if (!envelope.event || !envelope.eventId) return { reply: { ...ok(), outcome: { outcome: 'acknowledged', reason: 'no_event' } } };
  return { connection, teamId, event: envelope.event, eventId: envelope.eventId };
}

/**
 * Slack drops the app's events for the workspace past 30,000 an hour and says so once a minute
 * (https://docs.slack.dev/reference/events/app_rate_limited/): recorded on the connection (shown
 * by `GET …/connections/{id}`), counted in den_slack_events_rate_limited_total, and logged.
 */
async function rateLimitedReply(
  deps: EventsDeps,
  ctx: AppContext,
  { connectionId, minute }: { connectionId: string; minute: number | undefined },
): Promise<Reply> {
  const at = minute !== undefined ? new Date(minute * 1000) : new Date(Math.floor(deps.now() / 60_000) * 60_000);
  if (await recordEventsRateLimited(deps.db, { connectionId, minute: at })) {
    deps.metrics.slackEventsRateLimited.inc();
    ctx.state.log.warn({ connectionId, minute: at.toISOString() }, 'slack is dropping this app’s events (app_rate_limited)');
  }
  return { ...ok(), outcome: { outcome: 'acknowledged', reason: 'app_rate_limited' } };
}

/** A routed event: the connection it came through, its id, when it arrived, and its route. */
interface RoutedEvent {
  connection: SlackConnection & { teamId: string };
  eventId: string;
  receivedAt: number;
  classified: Routed;
}

/** The slack-event workflow's input: the event's route and the settings it runs under. */
function slackEventInput(settings: SlackSettings, { connection, eventId, receivedAt, classified }: RoutedEvent): SlackEventInput {
  return {
    connectionId: connection.id,
    organizationId: connection.organizationId,
    teamId: connection.teamId,
    eventId,
    receivedAt,
    settings: {
      linkWaitMs: settings.linkWaitMs,
      progressIntervalMs: settings.progressIntervalMs,
      memberDailyInvocations: settings.memberDailyInvocations,
      memberConcurrentRuns: settings.memberConcurrentRuns,
      run: { ...settings.runDefaults },
      replyMode: settings.replyMode,
      finalDeliveryDeadlineMs: settings.finalDeliveryDeadlineMs,
      continueAsNewEvents: settings.continueAsNewEvents,
      streamMaxAgeMs: settings.stream.maxAgeMs,
      streamMaxBytes: settings.stream.maxBytes,
    },
    ...(classified.route === 'lifecycle'
      ? { lifecycle: { type: classified.type } }
      : classified.route === 'surface'
        ? { surface: classified.surface }
        : { invocation: classified.invocation }),
  };
}

/**
 * Takes the event under the workspace's and the user's quotas (invocations only: lifecycle events
 * must always get through): its workflow started, or the event kept in Postgres until Temporal
 * takes it (src/slack/deferred-events.ts), so a busy or unreachable engine never costs a mention.
 */
async function enqueueEvent(
  deps: EventsDeps,
  input: SlackEventInput,
  keyOnMessage: boolean,
): Promise<{ ok: true; outcome: TakenOutcome } | { ok: false; reason: NotRoutedReason }> {
  const { settings, now, quota } = deps;
  let release: (() => Promise<void>) | undefined;
  if (input.invocation) {
    const verdict = await quota.tryTake(slackQuotaChecks(settings, input.teamId, input.invocation.user), now());
    if (!verdict.ok) return { ok: false, reason: verdict.key.startsWith('workspace:') ? 'workspace_quota' : 'user_quota' };
    release = verdict.release;
  }

  let outcome;
  try {
    outcome = await startOrDefer(
      { db: deps.db, ingress: deps.ingress, log: deps.log, ackWaitMs: settings.eventAckWaitMs },
      workflowIdOf(input, keyOnMessage),
      input,
    );
  } catch (error) {
    await release?.();
    throw error;
  }
  // A duplicate was counted against the quota by its first delivery already.
  if (outcome === 'duplicate' || outcome === 'not_enqueued') await release?.();
  return { ok: true, outcome };
}

/**
 * An invocation in a channel of a connection that takes follow-ups is keyed on its message: Slack
 * then sends a mention twice (`app_mention` and `message`), and one run comes of the two. Anything
 * else is keyed on its event, as before: without follow-ups the app subscribes to no channel
 * messages, and a DM arrives once.
 */
function workflowIdOf(input: SlackEventInput, keyOnMessage: boolean): string {
  const invocation = input.invocation;
  if (invocation && keyOnMessage && !askedInDm(invocation)) {
    return slackMessageWorkflowId(input.connectionId, invocation.channel, invocation.ts);
  }
  return slackEventWorkflowId(input.connectionId, input.eventId);
}

const askedInDm = (invocation: { channel: string; channelType: string | null }) =>
  invocation.channelType === 'im' || invocation.channel.startsWith('D');

/** The conversation's decision (channel messages, surfaces), else the classification every other event gets. */
async function routeOf(
  deps: EventsDeps,
  connection: SlackConnection,
  event: SlackEventPayload,
): Promise<{ classified: Routed; undo?: () => Promise<void> } | { ignore: NotRoutedReason }> {
  const conversation = await deps.threads.route(connection, event, deps.now());
  if (conversation !== undefined) return conversation;
  const classified = classifyEvent(event, connection);
  return classified.route === 'ignore' ? { ignore: classified.reason } : { classified };
}

async function receiveEvent(deps: EventsDeps, ctx: AppContext, signed: SignedBody): Promise<Reply> {
  const { settings, now } = deps;
  const log = ctx.state.log;
  const read = await readEvent(deps, ctx, signed);
  if ('reply' in read) return read.reply;
  const { event, eventId } = read;
  const connection = { ...read.connection, teamId: read.teamId };

  const notRouted = (reason: NotRoutedReason): Reply => {
    log.debug({ connectionId: connection.id, eventId, eventType: event.type, reason }, 'slack event not routed');
    return { ...ok(), outcome: { outcome: 'ineligible', reason } };
  };
  const routed = await routeOf(deps, connection, event);
  if ('ignore' in routed) return notRouted(routed.ignore);

  const input = slackEventInput(settings, { connection, eventId, receivedAt: now(), classified: routed.classified });
  let enqueued: Awaited<ReturnType<typeof enqueueEvent>>;
  try {
    enqueued = await enqueueEvent(deps, input, (connection.threadFollowUps ?? settings.threadFollowUps) !== 'off');
  } catch (error) {
    // Not enqueued: a retry of the event must not find its surface fresh.
    await routed.undo?.().catch(() => undefined);
    throw error;
  }
  if (!enqueued.ok) return notRouted(enqueued.reason);
  const outcome = enqueued.outcome;
  const retry = { retryNum: ctx.get('x-slack-retry-num') || undefined, retryReason: ctx.get('x-slack-retry-reason') || undefined };
  log.debug({ connectionId: connection.id, eventId, outcome, ...retry }, 'slack event acknowledged');
  const reason = input.lifecycle ? input.lifecycle.type : input.surface ? `surface_${input.surface.kind}` : input.invocation!.type;
  return { ...ok(), outcome: { outcome, reason } };
}

export function createEventsRoute(deps: EventsDeps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/{connectionId}/events',
    aliases: ['/v1/integrations/chatplatform/{connectionId}/events'],
    summary: 'Slack Events API request URL: verified, then durably enqueued before the ack.',
    description:
      "Signed with the connection's signing secret (`X-Slack-Signature`, `X-Slack-Request-Timestamp`, ±300 s). " +
      'Supported events start workflow `slack-event/{connectionId}/{event_id}` before the 200 (with thread follow-ups on, ' +
      'a channel invocation `slack-message/{connectionId}/{channel}/{ts}`, so a mention Slack sends twice starts one); a ' +
      'retry of the same `event_id` is acknowledged without a second workflow. Ineligible or disabled events, and channel ' +
      'messages that are not follow-ups, are acknowledged and not routed.',
    tags: ['Slack'],
    auth: 'signature',
    ingress: true,
    params: ConnectionParams,
    body: { kind: 'raw', limitBytes: EVENTS_BODY_LIMIT, contentType: 'application/json', description: 'The Events API envelope.' },
    beforeBody: ({ params }, ctx) => deps.verifier.checkHeaders(ctx, params.connectionId),
    responses: {
      200: { description: '`OkResponse`, or `{challenge}` for url_verification.', schema: z.union([OkResponse, Challenge]) },
      400: { description: 'Invalid connection id or payload.', schema: z.union([InvalidRequestError, OkFalse]) },
      401: { description: 'No such installation, or the signature is invalid.', schema: OkFalse },
      403: {
        description: "api_app_id differs from the installation's, or neither team_id nor authorizations[] names its workspace.",
        schema: OkFalse,
      },
      413: { description: 'Body over 1,000,000 bytes.', schema: PlainText, contentType: 'text/plain' },
      503: {
        description:
          'Temporal could not take the event in time, Postgres could not count it against the quotas, or the process holds ' +
          'as many unauthenticated bodies as it may (`busy`, with `Retry-After`); Slack retries.',
      },
    },
    handler: ({ params, rawBody }, ctx) => receiveEvent(deps, ctx, { connectionId: params.connectionId, rawBody }),
  });
}
