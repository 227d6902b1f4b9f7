/**
 * Activities of the slack-event workflow: Postgres records of links and limits, and the Slack
 * Web API calls. Every one is idempotent or harmless to repeat, since Temporal retries.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { disableSlackConnection, findSlackConnection } from '../src/slack/connections';
import { createLinkToken } from '../src/slack/link-token';
import { clearPendingInvocation, linkOrWait, type AccountLink } from '../src/slack/links';
import { releaseMemberInvocation, reserveMemberInvocation, type MemberLimits, type ReservationOutcome } from '../src/slack/limits';
import { connectLinkUrl, heldInvocationText } from '../src/slack/texts';
import { callSlackApi, hasReply, replyMetadata, type SlackApiMethod, type SlackApiResult } from '../src/slack/web-api';
import type { WorkerDeps } from '../src/app/feature';
import type { SlackSettings } from '../src/slack/settings';

/** What the Slack activities use, handed over by the feature's descriptor. */
type SlackActivityDeps = WorkerDeps<SlackSettings>;

/** A thread longer than this many pages of 200 is not searched further (the reply is recent). */
const REPLY_SCAN_PAGES = 5;

interface SlackPostResult {
  posted: boolean;
  /** Why nothing was posted: the connection has no bot token, or is disabled. */
  skipped?: 'no_bot_token' | 'connection_disabled' | 'no_connection';
}

/**
 * A failed Web API call as an activity failure: a final Slack error (channel_not_found…) is not
 * retried; a retryable one (a 429…) waits exactly the `Retry-After` Slack asked for, if any.
 */
function slackApiFailure(method: SlackApiMethod, result: Extract<SlackApiResult, { ok: false }>): ApplicationFailure {
  const message = `Slack ${method} failed: ${result.error}`;
  if (!result.retryable) return ApplicationFailure.nonRetryable(message, 'SlackApiError');
  return ApplicationFailure.create({ message, type: 'SlackApiError', nextRetryDelay: result.retryAfterMs });
}

/** One Web API post with the connection's bot token; skipped when the connection cannot post. */
async function post(
  deps: SlackActivityDeps,
  connectionId: string,
  method: 'chat.postMessage' | 'chat.postEphemeral',
  body: (connection: { teamId: string }) => Promise<Record<string, unknown>> | Record<string, unknown>,
): Promise<SlackPostResult> {
  const connection = await findSlackConnection(deps.db, deps.secretKey, connectionId);
  if (!connection) return { posted: false, skipped: 'no_connection' };
  if (!connection.enabled) return { posted: false, skipped: 'connection_disabled' };
  if (!connection.botToken) return { posted: false, skipped: 'no_bot_token' };
  const result = await callSlackApi({ baseUrl: deps.settings.apiBaseUrl, token: connection.botToken }, method, await body(connection));
  if (result.ok) return { posted: true };
  throw slackApiFailure(method, result);
}

/** Up to REPLY_SCAN_PAGES pages of the thread, looking for our reply. Throws (retryably) when Slack cannot tell. */
async function alreadyReplied(
  deps: SlackActivityDeps,
  input: { connectionId: string; channel: string; threadTs: string; replyKey: string },
): Promise<boolean> {
  const connection = await findSlackConnection(deps.db, deps.secretKey, input.connectionId);
  if (!connection?.botToken) return false;
  let cursor: string | undefined;
  for (let page = 0; page < REPLY_SCAN_PAGES; page++) {
    const result = await callSlackApi({ baseUrl: deps.settings.apiBaseUrl, token: connection.botToken }, 'conversations.replies', {
      channel: input.channel,
      ts: input.threadTs,
      include_all_metadata: true,
      limit: 200,
      ...(cursor ? { cursor } : {}),
    });
    // Unknown whether the first post landed: never post blind. A missing scope will not fix
    // itself; anything else is worth the next attempt.
    if (!result.ok) throw slackApiFailure('conversations.replies', result);
    if (hasReply(result.body, input.replyKey)) return true;
    cursor = (result.body.response_metadata as { next_cursor?: string } | undefined)?.next_cursor || undefined;
    if (!cursor) return false;
  }
  return false;
}

function disableConnectionActivity(deps: SlackActivityDeps) {
  return async function slackDisableConnection(input: { connectionId: string; reason: string }): Promise<{ disabled: boolean }> {
    const disabled = await disableSlackConnection(deps.db, input.connectionId, input.reason);
    deps.log.info({ connectionId: input.connectionId, reason: input.reason, disabled }, 'slack connection disabled by lifecycle event');
    return { disabled };
  };
}

function linkOrWaitActivity(deps: SlackActivityDeps) {
  return async function slackLinkOrWait(input: {
    connectionId: string;
    slackUserId: string;
    eventId: string;
    workflowId: string;
    waitMs: number;
  }): Promise<AccountLink | null> {
    const link = await linkOrWait(deps.db, { ...input, expiresAt: new Date(Date.now() + input.waitMs) });
    return link ?? null;
  };
}

function clearPendingActivity(deps: SlackActivityDeps) {
  return async function slackClearPending(input: { connectionId: string; eventId: string }): Promise<void> {
    await clearPendingInvocation(deps.db, input.connectionId, input.eventId);
  };
}

function reserveInvocationActivity(deps: SlackActivityDeps) {
  return async function slackReserveInvocation(input: {
    connectionId: string;
    eventId: string;
    organizationId: string;
    memberId: string;
    runId: string;
    limits: MemberLimits;
  }): Promise<ReservationOutcome> {
    return reserveMemberInvocation(deps.db, { ...input, now: new Date() });
  };
}

function releaseInvocationActivity(deps: SlackActivityDeps) {
  return async function slackReleaseInvocation(input: { connectionId: string; eventId: string }): Promise<void> {
    await releaseMemberInvocation(deps.db, input.connectionId, input.eventId, new Date());
  };
}

/** The ephemeral "connect your account" message, with a fresh one-time link token. */
function postConnectPromptActivity(deps: SlackActivityDeps) {
  return async function slackPostConnectPrompt(input: {
    connectionId: string;
    channel: string;
    user: string;
    threadTs: string | null;
    waitMs: number;
  }): Promise<SlackPostResult> {
    return post(deps, input.connectionId, 'chat.postEphemeral', (connection) => {
      const ttlMs = deps.settings.linkTokenTtlMs;
      const { token } = createLinkToken(deps.secretKey, {
        connectionId: input.connectionId,
        teamId: connection.teamId,
        slackUserId: input.user,
        now: Date.now(),
        ttlMs,
      });
      const url = connectLinkUrl(deps.platform.publicBaseUrl, token);
      return {
        channel: input.channel,
        user: input.user,
        text: heldInvocationText(url, ttlMs, input.waitMs),
        ...(input.threadTs ? { thread_ts: input.threadTs } : {}),
      };
    });
  };
}

function postEphemeralActivity(deps: SlackActivityDeps) {
  return async function slackPostEphemeral(input: {
    connectionId: string;
    channel: string;
    user: string;
    threadTs: string | null;
    text: string;
  }) {
    return post(deps, input.connectionId, 'chat.postEphemeral', () => ({
      channel: input.channel,
      user: input.user,
      text: input.text,
      ...(input.threadTs ? { thread_ts: input.threadTs } : {}),
    }));
  };
}

/**
 * The run's answer in its thread, exactly once. Slack documents `internal_error` and
 * `fatal_error` as possibly partial successes, and a worker can stop between Slack's 200 and
 * the activity's completion: a retry cannot know whether the first post landed. So the post
 * carries the invocation's key in its metadata, and every retry first looks for it in the
 * thread (conversations.replies, which needs the `*:history` scopes) before posting again.
 */
function postMessageActivity(deps: SlackActivityDeps) {
  return async function slackPostMessage(input: {
    connectionId: string;
    channel: string;
    threadTs: string;
    text: string;
    replyKey: string;
  }) {
    if (Context.current().info.attempt > 1 && (await alreadyReplied(deps, input))) return { posted: true };
    return post(deps, input.connectionId, 'chat.postMessage', () => ({
      channel: input.channel,
      thread_ts: input.threadTs,
      text: input.text,
      metadata: replyMetadata(input.replyKey),
    }));
  };
}

export function createSlackActivities(deps: SlackActivityDeps) {
  return {
    slackDisableConnection: disableConnectionActivity(deps),
    slackLinkOrWait: linkOrWaitActivity(deps),
    slackClearPending: clearPendingActivity(deps),
    slackReserveInvocation: reserveInvocationActivity(deps),
    slackReleaseInvocation: releaseInvocationActivity(deps),
    slackPostConnectPrompt: postConnectPromptActivity(deps),
    slackPostEphemeral: postEphemeralActivity(deps),
    slackPostMessage: postMessageActivity(deps),
  };
}

/** The activities as the feature's workflow proxies them. */
export type SlackActivities = ReturnType<typeof createSlackActivities>;
