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
import { markdownToMrkdwn } from '../src/slack/mrkdwn';
import { connectLinkUrl, escapeMrkdwn, heldInvocationText } from '../src/slack/texts';
import { callSlackApi, findReply, replyMetadata, type SlackApiMethod, type SlackApiResult } from '../src/slack/web-api';
import { finalBlocks, progressBlocks, splitMessage, WORKING_TEXT } from '../src/slack/progress';
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
  const result = await callCounted(deps, connection.botToken, method, await body(connection));
  if (result.ok) return { posted: true };
  throw slackApiFailure(method, result);
}

/** The outcome label of a message call in den_slack_messages_total. */
function messageOutcome(result: SlackApiResult): string {
  if (result.ok) return 'ok';
  return result.error === 'ratelimited' || result.error === 'message_not_found' ? result.error : 'failed';
}

/**
 * One Web API call, counted in den_slack_messages_total{method, outcome} when it posts or edits a
 * message (the worker's SDK runtime exports the counter).
 */
async function callCounted(deps: SlackActivityDeps, token: string, method: SlackApiMethod, body: Record<string, unknown>) {
  const result = await callSlackApi({ baseUrl: deps.settings.apiBaseUrl, token }, method, body);
  if (method !== 'conversations.replies') {
    Context.current()
      .metricMeter.createCounter('den_slack_messages_total', 'messages', 'Slack messages posted and edited, by method and outcome.')
      .add(1, { method, outcome: messageOutcome(result) });
  }
  return result;
}

/** Up to REPLY_SCAN_PAGES pages of the thread, looking for our reply. Throws (retryably) when Slack cannot tell. */
async function alreadyReplied(
  deps: SlackActivityDeps,
  input: { connectionId: string; channel: string; threadTs: string; replyKey: string },
): Promise<boolean> {
  return (await existingReply(deps, input)) !== undefined;
}

/** Our reply with this key in the thread: its `ts`, or undefined. Throws (retryably) when Slack cannot tell. */
async function existingReply(
  deps: SlackActivityDeps,
  input: { connectionId: string; channel: string; threadTs: string; replyKey: string },
): Promise<string | undefined> {
  const connection = await findSlackConnection(deps.db, deps.secretKey, input.connectionId);
  if (!connection?.botToken) return undefined;
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
    const found = findReply(result.body, input.replyKey);
    if (found !== undefined) return found;
    cursor = (result.body.response_metadata as { next_cursor?: string } | undefined)?.next_cursor || undefined;
    if (!cursor) return undefined;
  }
  return undefined;
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

/** Where an invocation's message lives: the thread, and the message's `ts` once posted. */
interface SlackMessageRef {
  connectionId: string;
  channel: string;
  threadTs: string;
}

/**
 * The invocation's one message, posted in the thread as the run starts: "Working on it…" with the
 * Cancel button. Exactly once, by the reply's rule (postMessageActivity): a retry first looks for
 * the message's key in the thread. Answers the message's ts.
 */
function postAcceptedActivity(deps: SlackActivityDeps) {
  return async function slackPostAccepted(
    input: SlackMessageRef & { runId: string; replyKey: string },
  ): Promise<SlackPostResult & { ts?: string }> {
    if (Context.current().info.attempt > 1) {
      const ts = await existingReply(deps, input);
      if (ts !== undefined) return { posted: true, ts };
    }
    const connection = await findSlackConnection(deps.db, deps.secretKey, input.connectionId);
    if (!connection) return { posted: false, skipped: 'no_connection' };
    if (!connection.enabled) return { posted: false, skipped: 'connection_disabled' };
    if (!connection.botToken) return { posted: false, skipped: 'no_bot_token' };
    const result = await callCounted(deps, connection.botToken, 'chat.postMessage', {
      channel: input.channel,
      thread_ts: input.threadTs,
      text: WORKING_TEXT,
      blocks: progressBlocks(WORKING_TEXT, input.runId),
      metadata: replyMetadata(input.replyKey),
    });
    if (!result.ok) throw slackApiFailure('chat.postMessage', result);
    return { posted: true, ts: String(result.body.ts) };
  };
}

/** What an edit did: a 429 and a deleted message are answers (the workflow decides), not failures. */
type EditOutcome = { outcome: 'updated' | 'message_not_found' | 'skipped' | 'failed' } | { outcome: 'ratelimited'; retryAfterMs: number };

/** One chat.update of the message; a retryable failure other than a 429 throws (Temporal retries it). */
async function editMessage(
  deps: SlackActivityDeps,
  input: SlackMessageRef & { ts: string },
  text: string,
  blocks: Record<string, unknown>[],
): Promise<EditOutcome> {
  const connection = await findSlackConnection(deps.db, deps.secretKey, input.connectionId);
  if (!connection?.enabled || !connection.botToken) return { outcome: 'skipped' };
  const result = await callCounted(deps, connection.botToken, 'chat.update', { channel: input.channel, ts: input.ts, text, blocks });
  if (result.ok) return { outcome: 'updated' };
  if (result.error === 'ratelimited') return { outcome: 'ratelimited', retryAfterMs: result.retryAfterMs ?? 1000 };
  if (result.error === 'message_not_found') return { outcome: 'message_not_found' };
  if (result.retryable) throw slackApiFailure('chat.update', result);
  deps.log.warn({ connectionId: input.connectionId, error: result.error }, 'slack chat.update refused');
  return { outcome: 'failed' };
}

/** The run's progress in the invocation's message (the Cancel button stays). */
function updateProgressActivity(deps: SlackActivityDeps) {
  return async function slackUpdateProgress(input: SlackMessageRef & { ts: string; runId: string; text: string }): Promise<EditOutcome> {
    return editMessage(deps, input, input.text, progressBlocks(input.text, input.runId));
  };
}

/**
 * The run's answer in place of the progress: Markdown from the runtime as Slack mrkdwn (`text`
 * is Markdown when `markdown`, else mrkdwn already), the first part in the message, the rest as
 * replies in the thread (each exactly once, by its own key). A message someone deleted (or none
 * posted) is answered with new replies instead.
 */
function finishMessageActivity(deps: SlackActivityDeps) {
  return async function slackFinishMessage(
    input: SlackMessageRef & { ts: string | null; text: string; markdown: boolean; replyKey: string },
  ): Promise<EditOutcome | { outcome: 'posted' }> {
    // Markdown that renders as nothing (only link definitions) shows as the text it is.
    const text = input.markdown ? markdownToMrkdwn(input.text) || escapeMrkdwn(input.text.trim()) : input.text;
    const parts = splitMessage(text);
    let first = 0;
    let outcome: EditOutcome | { outcome: 'posted' } = { outcome: 'posted' };
    if (input.ts !== null) {
      outcome = await editMessage(deps, { ...input, ts: input.ts }, parts[0]!, finalBlocks(parts[0]!));
      if (outcome.outcome === 'ratelimited' || outcome.outcome === 'skipped') return outcome;
      if (outcome.outcome !== 'message_not_found') first = 1;
    }
    const reply = postMessageActivity(deps);
    for (let index = first; index < parts.length; index++) {
      const posted = await reply({ ...input, text: parts[index]!, replyKey: `${input.replyKey}/part-${index + 1}` });
      if (!posted.posted) return { outcome: 'skipped' };
    }
    return first === 1 ? outcome : { outcome: 'posted' };
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
    slackPostAccepted: postAcceptedActivity(deps),
    slackUpdateProgress: updateProgressActivity(deps),
    slackFinishMessage: finishMessageActivity(deps),
  };
}

/** The activities as the feature's workflow proxies them. */
export type SlackActivities = ReturnType<typeof createSlackActivities>;
