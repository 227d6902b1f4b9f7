/**
 * Activities of the slack-event workflow: Postgres records of links and limits, and the Slack
 * Web API calls. Every one is idempotent or harmless to repeat, since Temporal retries.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { disableSlackConnection } from '../src/slack/connections';
import { uninstallSlackConnection } from '../src/slack/connection-lifecycle';
import { slackConnectionRemovedSignal, slackThreadTurnSignal } from '../src/slack/contract';
import { SlackBudget, type BudgetPriority, type BudgetVerdict } from '../src/slack/budget';
import { ChannelPacer } from '../src/slack/pacing';
import {
  earlierPosts,
  isConnectionError,
  postableConnection,
  sendWithin,
  type BudgetTake,
  type SlackCallDeps,
} from '../src/slack/outbound';
import { issueConnectGrant } from '../src/slack/link-codes';
import { clearPendingInvocation, linkOrWait, type AccountLink, type ConnectionGone } from '../src/slack/links';
import { releaseMemberInvocation, reserveMemberInvocation, type MemberLimits, type ReservationOutcome } from '../src/slack/limits';
import { markdownToMrkdwn } from '../src/slack/mrkdwn';
import { connectLinkUrl, escapeMrkdwn, heldInvocationText } from '../src/slack/texts';
import { replyMetadata, type SlackApiMethod, type SlackApiResult } from '../src/slack/web-api';
import { finalBlocks, progressBlocks, splitMessage, SUPERSEDED_TEXT, WORKING_TEXT } from '../src/slack/progress';
import { createStreamActivities } from './slack-stream';
import { createConversationActivities } from './slack-conversation';
import { noRuntimeText, QUEUED_TEXT } from '../src/slack/runtime-texts';
import { firstLinkPromptInThread, recordThreadAsk, recordThreadMessage, threadWaiters, type ThreadKey } from '../src/slack/threads';
import type { WorkerDeps } from '../src/app/feature';
import type { SlackSettings } from '../src/slack/settings';

/** What the Slack activities use, handed over by the feature's descriptor. */
type SlackActivityDeps = WorkerDeps<SlackSettings>;

interface SlackPostResult {
  posted: boolean;
  /** Why nothing was posted: the connection has no bot token, or is disabled. */
  skipped?: 'no_bot_token' | 'connection_disabled' | 'no_connection';
}

/**
 * A failed Web API call as an activity failure: a final Slack error (channel_not_found…) is not
 * retried; a retryable one (a 429, or no token left in the workspace's budget) waits exactly the
 * time Slack or the budget asked for, if any.
 */
function slackApiFailure(method: SlackApiMethod, result: Extract<SlackApiResult, { ok: false }>): ApplicationFailure {
  const message = `Slack ${method} failed: ${result.error}`;
  if (!result.retryable) return ApplicationFailure.nonRetryable(message, 'SlackApiError');
  return ApplicationFailure.create({ message, type: 'SlackApiError', nextRetryDelay: result.retryAfterMs });
}

/**
 * What the Slack calls need, with their metrics from the worker's SDK runtime (WORKER_METRICS_PORT):
 * den_slack_messages_total{method, outcome} and den_slack_budget_tokens{method, priority}.
 */
function slackCallDeps(deps: SlackActivityDeps): SlackCallDeps {
  const budget = new SlackBudget(deps.db, deps.settings.budget);
  return {
    db: deps.db,
    secretKey: deps.secretKey,
    settings: deps.settings,
    log: deps.log,
    budget,
    pacer: new ChannelPacer(deps.db, deps.settings.channelPostIntervalMs),
    observe: {
      call(method: SlackApiMethod, outcome: string) {
        Context.current()
          .metricMeter.createCounter(
            'den_slack_messages_total',
            'messages',
            'Slack messages posted, edited and streamed, by method and outcome.',
          )
          .add(1, { method, outcome });
      },
      budget({ method, priority }: BudgetTake, verdict: BudgetVerdict) {
        if (!Number.isFinite(verdict.tokens)) return;
        const meter = Context.current().metricMeter;
        meter
          .createGauge(
            'den_slack_budget_tokens',
            'float',
            'tokens',
            "Tokens left in a workspace's Slack budget after the last take, by method.",
          )
          .set(Math.max(0, verdict.tokens), { method });
        if (!verdict.taken) {
          meter
            .createCounter(
              'den_slack_budget_waits_total',
              'calls',
              'Slack calls held back by the workspace budget, by method and priority.',
            )
            .add(1, { method, priority });
        }
      },
    },
  };
}

/** A message to post: the method, and its arguments made for the connection it goes through. */
interface MessagePost {
  method: 'chat.postMessage' | 'chat.postEphemeral';
  body: (connection: { teamId: string | null }) => Promise<Record<string, unknown>> | Record<string, unknown>;
}

/**
 * One post with the connection's bot token, within its budget; skipped when the connection cannot post.
 * These helpers reach Slack and the connection through `calls` alone, which carries the store, key and log they need.
 */
async function post(calls: SlackCallDeps, connectionId: string, { method, body }: MessagePost): Promise<SlackPostResult & { ts?: string }> {
  const postable = await postableConnection(calls, connectionId);
  if ('skipped' in postable) return { posted: false, skipped: postable.skipped };
  const result = await sendWithin(calls, postable.connection, { method, body: await body(postable.connection), priority: 'final' });
  if (result.ok) return { posted: true, ...(typeof result.body.ts === 'string' ? { ts: result.body.ts } : {}) };
  throw slackApiFailure(method, result);
}

/** When the post a retry looks for was first asked for: the workflow's own time, else the activity's first schedule. */
const firstAskedAt = (since: number | undefined) => since ?? Context.current().info.scheduledTimestampMs;

/**
 * A reply in the thread exactly once, as far as Slack can tell: the post carries its key in its
 * metadata, and a retry (Slack documents `internal_error` and `fatal_error` as possibly partial
 * successes, and a worker can stop between Slack's 200 and the activity's end) first looks for
 * that key with one conversations.replies call. When Slack cannot tell, it posts once more.
 */
async function replyOnce(
  calls: SlackCallDeps,
  input: { connectionId: string; channel: string; threadTs: string; replyKey: string; since?: number; again?: boolean },
  body: Record<string, unknown>,
): Promise<SlackPostResult & { ts?: string }> {
  if (input.again || Context.current().info.attempt > 1) {
    const postable = await postableConnection(calls, input.connectionId);
    if ('connection' in postable) {
      const found = await earlierPosts(calls, postable.connection, { ...input, since: firstAskedAt(input.since) });
      const ts = found === 'unknown' ? undefined : found.get(input.replyKey);
      if (ts !== undefined) return { posted: true, ts };
    }
  }
  return post(calls, input.connectionId, {
    method: 'chat.postMessage',
    body: () => ({ channel: input.channel, thread_ts: input.threadTs, ...body, metadata: replyMetadata(input.replyKey) }),
  });
}

function disableConnectionActivity(deps: SlackActivityDeps) {
  return async function slackDisableConnection(input: { connectionId: string; reason: string }): Promise<{ disabled: boolean }> {
    const disabled = await disableSlackConnection(deps.db, input);
    deps.log.info({ connectionId: input.connectionId, reason: input.reason, disabled }, 'slack connection disabled by lifecycle event');
    return { disabled };
  };
}

/**
 * `app_uninstalled`: the connection marked uninstalled, its member links removed, and its
 * invocations waiting for a link ended (told inside the transaction, so a Temporal outage retries
 * the whole of it).
 */
function uninstallConnectionActivity(deps: SlackActivityDeps) {
  return async function slackUninstallConnection(input: { connectionId: string }): Promise<{ links: number; waiting: number }> {
    const removal = await uninstallSlackConnection(deps.db, input, async (workflowIds) => {
      for (const id of workflowIds) {
        await deps.ingress.signal({ id, signal: slackConnectionRemovedSignal, args: [{ reason: 'app_uninstalled' }] });
      }
    });
    deps.log.info({ connectionId: input.connectionId, ...removal }, 'slack connection uninstalled by lifecycle event');
    return removal ?? { links: 0, waiting: 0 };
  };
}

function linkOrWaitActivity(deps: SlackActivityDeps) {
  return async function slackLinkOrWait(input: {
    connectionId: string;
    slackUserId: string;
    eventId: string;
    workflowId: string;
    waitMs: number;
    /** The thread it was asked in: its connect prompt is posted once per user and thread. */
    thread?: ThreadKey;
  }): Promise<AccountLink | ConnectionGone | { held: true; prompted: boolean } | null> {
    const link = await linkOrWait(deps.db, { ...input, expiresAt: new Date(Date.now() + input.waitMs) });
    if (link || input.thread === undefined) return link ?? null;
    // Held: whether this thread already asked this user to link (then no second prompt).
    return { held: true, prompted: !(await firstLinkPromptInThread(deps.db, input.thread, input.slackUserId)) };
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
    /** The request in its thread: the thread is answered from now on, and this request is one of its messages. */
    thread?: ThreadKey & { ts: string; text: string; slackUserId: string; workflowId: string };
  }): Promise<ReservationOutcome & { openedThread?: boolean }> {
    const { thread, ...reservation } = input;
    const reserved = await reserveMemberInvocation(deps.db, {
      ...reservation,
      now: new Date(),
      ...(thread ? { thread: { channel: thread.channel, threadTs: thread.threadTs, workflowId: thread.workflowId } } : {}),
    });
    if (!reserved.ok || thread === undefined) return reserved;
    const ask = { ts: thread.ts, slackUserId: thread.slackUserId, memberId: input.memberId, text: thread.text };
    const { opened } = await recordThreadAsk(deps.db, { ...thread, organizationId: input.organizationId }, ask);
    return { ...reserved, openedThread: opened };
  };
}

function releaseInvocationActivity(deps: SlackActivityDeps) {
  return async function slackReleaseInvocation(input: {
    connectionId: string;
    eventId: string;
    /** The answer, kept as the thread's message for the next request's context. */
    answer?: ThreadKey & { ts: string; text: string };
  }): Promise<void> {
    await releaseMemberInvocation(deps.db, { connectionId: input.connectionId, eventId: input.eventId, now: new Date() });
    if (input.answer) {
      const { ts, text, ...thread } = input.answer;
      await recordThreadMessage(deps.db, thread, { ts, userId: null, bot: true, text });
    }
    // The thread's requests queued behind this one look again (they also look on their own, now and then).
    for (const id of await threadWaiters(deps.db, input)) {
      await deps.ingress.signal({ id, signal: slackThreadTurnSignal, args: [] }).catch((error: unknown) => {
        deps.log.warn({ err: error, workflowId: id }, 'could not tell a queued slack request its turn came');
      });
    }
  };
}

/** The ephemeral "connect your account" message, with a fresh one-time link code (and the dashboard's link, when there is one). */
function postConnectPromptActivity(deps: SlackActivityDeps, calls: SlackCallDeps) {
  return async function slackPostConnectPrompt(input: {
    connectionId: string;
    channel: string;
    user: string;
    threadTs: string | null;
    waitMs: number;
  }): Promise<SlackPostResult> {
    return post(calls, input.connectionId, {
      method: 'chat.postEphemeral',
      body: async (connection) => {
        const ttlMs = deps.settings.linkTokenTtlMs;
        const { token, code } = await issueConnectGrant(deps, {
          connectionId: input.connectionId,
          teamId: connection.teamId!,
          slackUserId: input.user,
          now: Date.now(),
          ttlMs,
        });
        const dashboard = deps.settings.dashboardUrl;
        const url = dashboard === undefined ? undefined : connectLinkUrl(dashboard, token);
        return {
          channel: input.channel,
          user: input.user,
          text: heldInvocationText({ url, code, ttlMs }, input.waitMs),
          ...(input.threadTs ? { thread_ts: input.threadTs } : {}),
        };
      },
    });
  };
}

function postEphemeralActivity(calls: SlackCallDeps) {
  return async function slackPostEphemeral(input: {
    connectionId: string;
    channel: string;
    user: string;
    threadTs: string | null;
    text: string;
  }) {
    return post(calls, input.connectionId, {
      method: 'chat.postEphemeral',
      body: () => ({
        channel: input.channel,
        user: input.user,
        text: input.text,
        ...(input.threadTs ? { thread_ts: input.threadTs } : {}),
      }),
    });
  };
}

/** The run's answer in its thread, exactly once as far as Slack can tell (replyOnce): events from before the message was kept current. */
function postMessageActivity(calls: SlackCallDeps) {
  return async function slackPostMessage(input: {
    connectionId: string;
    channel: string;
    threadTs: string;
    text: string;
    replyKey: string;
    since?: number;
  }): Promise<SlackPostResult> {
    const posted = await replyOnce(calls, input, { text: input.text });
    return { posted: posted.posted, ...(posted.skipped ? { skipped: posted.skipped } : {}) };
  };
}

/** Where an invocation's message goes: its connection, channel and thread (each call that edits it adds the message's `ts`). */
interface SlackMessageRef {
  connectionId: string;
  channel: string;
  threadTs: string;
}

/**
 * The invocation's one message, posted in the thread as the run starts: "Working on it…" with the
 * Cancel button, exactly once by replyOnce's rule. Answers the message's ts.
 */
function postAcceptedActivity(calls: SlackCallDeps) {
  return async function slackPostAccepted(
    input: SlackMessageRef & { runId: string; replyKey: string; since?: number; notice?: FirstMessageNotice },
  ): Promise<SlackPostResult & { ts?: string }> {
    if (input.notice?.kind === 'queued') return replyOnce(calls, input, { text: QUEUED_TEXT, blocks: finalBlocks(QUEUED_TEXT) });
    const text = input.notice?.kind === 'no_runtime' ? noRuntimeText({ ...input.notice, now: Date.now() }) : WORKING_TEXT;
    return replyOnce(calls, input, { text, blocks: progressBlocks(text, input.runId) });
  };
}

/**
 * What the invocation's first message says instead of "Working on it…": no runtime of the member's
 * is online (it waits `claimDeadlineMs`), or the request is queued behind another in its thread.
 */
export type FirstMessageNotice = { kind: 'no_runtime'; claimDeadlineMs: number; lastSeenAt: number | null } | { kind: 'queued' };

/** What an edit did: a 429 (or no budget) and a refusal are answers (the workflow decides), not failures. */
type EditOutcome =
  { outcome: 'updated' | 'message_not_found' | 'skipped' | 'failed'; error?: string } | { outcome: 'ratelimited'; retryAfterMs: number };

/** What an edit sets, and whether it is a final answer or progress that may wait. */
interface MessageEdit {
  text: string;
  blocks: Record<string, unknown>[];
  priority: BudgetPriority;
}

/** One chat.update of the message within the workspace's budget; a retryable failure other than a 429 throws (Temporal retries it). */
async function editMessage(
  calls: SlackCallDeps,
  input: SlackMessageRef & { ts: string },
  { text, blocks, priority }: MessageEdit,
): Promise<EditOutcome> {
  const postable = await postableConnection(calls, input.connectionId);
  if ('skipped' in postable) return { outcome: 'skipped' };
  const body = { channel: input.channel, ts: input.ts, text, blocks };
  const result = await sendWithin(calls, postable.connection, { method: 'chat.update', body, priority });
  if (result.ok) return { outcome: 'updated' };
  if (result.error === 'ratelimited') return { outcome: 'ratelimited', retryAfterMs: result.retryAfterMs ?? 1000 };
  if (result.error === 'message_not_found') return { outcome: 'message_not_found', error: result.error };
  if (result.retryable) throw slackApiFailure('chat.update', result);
  calls.log.warn({ connectionId: input.connectionId, error: result.error }, 'slack chat.update refused');
  return { outcome: 'failed', error: result.error };
}

/** The run's progress in the invocation's message (the Cancel button stays); it yields the budget to final answers. */
function updateProgressActivity(calls: SlackCallDeps) {
  return async function slackUpdateProgress(
    input: SlackMessageRef & { ts: string; runId: string; text: string; notice?: FirstMessageNotice },
  ): Promise<EditOutcome> {
    // A queued follow-up's message that becomes its first: the notice it opens with, if any, else the text.
    const text = input.notice?.kind === 'no_runtime' ? noRuntimeText({ ...input.notice, now: Date.now() }) : input.text;
    return editMessage(calls, input, { text, blocks: progressBlocks(text, input.runId), priority: 'progress' });
  };
}

/** The answer as mrkdwn parts of at most a section's size: Markdown from the runtime converted (and escaped), else mrkdwn already. */
function answerParts(input: { text: string; markdown: boolean }): string[] {
  // Markdown that renders as nothing (only link definitions) shows as the text it is.
  const text = input.markdown ? markdownToMrkdwn(input.text) || escapeMrkdwn(input.text.trim()) : input.text;
  return splitMessage(text);
}

/**
 * The run's answer in place of the progress, as events took it before SLACK_ANSWER_PATCH: the
 * first part in the message, the rest as replies (each exactly once, by its own key); a message
 * someone deleted (or none posted) is answered with new replies instead.
 */
function finishMessageActivity(calls: SlackCallDeps) {
  return async function slackFinishMessage(
    input: SlackMessageRef & { ts: string | null; text: string; markdown: boolean; replyKey: string },
  ): Promise<EditOutcome | { outcome: 'posted' }> {
    const parts = answerParts(input);
    let first = 0;
    let outcome: EditOutcome | { outcome: 'posted' } = { outcome: 'posted' };
    if (input.ts !== null) {
      const head = parts[0]!;
      outcome = await editMessage(calls, { ...input, ts: input.ts }, { text: head, blocks: finalBlocks(head), priority: 'final' });
      if (outcome.outcome === 'ratelimited' || outcome.outcome === 'skipped') return outcome;
      if (outcome.outcome !== 'message_not_found') first = 1;
    }
    for (let index = first; index < parts.length; index++) {
      const posted = await replyOnce(calls, { ...input, replyKey: `${input.replyKey}/part-${index + 1}` }, { text: parts[index]! });
      if (!posted.posted) return { outcome: 'skipped' };
    }
    return first === 1 ? outcome : { outcome: 'posted' };
  };
}

/** How long one delivery keeps posting parts before it hands back how far it got (its activity times out at 30 s). */
const PARTS_PER_CALL_MS = 12_000;

/** How far a final delivery got: the workflow hands it back after a wait, so nothing is sent twice. */
export interface DeliveryProgress {
  /** The first part is in the invocation's message. */
  edited: boolean;
  /** The edit was refused: every part goes as a new reply, and the message is superseded. */
  asReplies: boolean;
  /** Why the edit was refused. */
  refusal?: string;
  /** Parts posted so far (the edited one counts). */
  posted: number;
  /** The first message no longer offers the Cancel button (or is gone). */
  superseded: boolean;
}

export type DeliveryOutcome =
  | { outcome: 'delivered'; progress: DeliveryProgress }
  | { outcome: 'ratelimited'; retryAfterMs: number; progress: DeliveryProgress }
  | { outcome: 'failed'; error: string; progress: DeliveryProgress }
  | { outcome: 'skipped'; progress: DeliveryProgress };

type DeliveryInput = SlackMessageRef & {
  ts: string | null;
  text: string;
  markdown: boolean;
  replyKey: string;
  since: number;
  again?: boolean;
};

/**
 * The first part in the invocation's message, from the delivery's progress so far. Refused for any
 * reason but the connection's (a closed edit window, a message too long or gone, blocks Slack will
 * not take…), the answer goes as new replies instead.
 */
async function editFirstPart(calls: SlackCallDeps, input: DeliveryInput & { progress: DeliveryProgress }, first: string) {
  const progress = input.progress;
  if (input.ts === null) return { ...progress, asReplies: true, superseded: true };
  const edit = await editMessage(calls, { ...input, ts: input.ts }, { text: first, blocks: finalBlocks(first), priority: 'final' });
  if (edit.outcome === 'updated') return { ...progress, edited: true, posted: 1, superseded: true };
  if (edit.outcome === 'ratelimited' || edit.outcome === 'skipped') return edit;
  if (edit.error !== undefined && isConnectionError(edit.error)) return { outcome: 'failed' as const, error: edit.error };
  return { ...progress, asReplies: true, refusal: edit.error, superseded: edit.outcome === 'message_not_found' };
}

/** The first message, whose edit Slack refused: marked superseded, or deleted when it cannot be edited at all; left as it is if neither works. */
async function supersede(calls: SlackCallDeps, input: DeliveryInput & { ts: string }): Promise<EditOutcome> {
  const marked = await editMessage(calls, input, { text: SUPERSEDED_TEXT, blocks: finalBlocks(SUPERSEDED_TEXT), priority: 'final' });
  if (marked.outcome !== 'failed') return marked;
  const postable = await postableConnection(calls, input.connectionId);
  if ('skipped' in postable) return { outcome: 'skipped' };
  const body = { channel: input.channel, ts: input.ts };
  const deleted = await sendWithin(calls, postable.connection, { method: 'chat.delete', body, priority: 'final' });
  if (deleted.ok) return { outcome: 'updated' };
  if (deleted.error === 'ratelimited') return { outcome: 'ratelimited', retryAfterMs: deleted.retryAfterMs ?? 1000 };
  calls.log.warn(
    { connectionId: input.connectionId, error: deleted.error },
    'slack: a superseded message could be neither edited nor deleted',
  );
  return { outcome: 'failed', error: deleted.error };
}

/**
 * The run's answer, so that it always lands: the first part in the invocation's message and the
 * rest as replies; or, when Slack refuses the edit for any reason but the connection's, every part
 * as a new reply, then the first message superseded (SUPERSEDED_TEXT, no Cancel button) or deleted.
 * Within the workspace's budget as a final answer: out of tokens or rate-limited, it answers how
 * far it got and how long to wait, and the workflow calls it again after a timer.
 */
function deliverAnswerActivity(calls: SlackCallDeps) {
  return async function slackDeliverAnswer(input: DeliveryInput & { progress: DeliveryProgress }): Promise<DeliveryOutcome> {
    const parts = answerParts(input);
    const startedAt = Date.now();
    let progress = input.progress;
    if (!progress.edited && !progress.asReplies) {
      const first = await editFirstPart(calls, input, parts[0]!);
      if ('outcome' in first) {
        if (first.outcome === 'ratelimited') return { outcome: 'ratelimited', retryAfterMs: first.retryAfterMs, progress };
        if (first.outcome === 'failed') return { outcome: 'failed', error: first.error ?? 'failed', progress };
        return { outcome: 'skipped', progress };
      }
      progress = first;
    }
    const firstPart = progress.posted;
    for (let index = progress.posted; index < parts.length; index++) {
      // Parts go out at their channel's pace: a long answer hands back how far it got well within
      // the activity's timeout, and the workflow calls again for the rest.
      if (index > firstPart && Date.now() - startedAt > PARTS_PER_CALL_MS) return { outcome: 'ratelimited', retryAfterMs: 1, progress };
      const key = progress.asReplies ? `${input.replyKey}/answer-${index + 1}` : `${input.replyKey}/part-${index + 1}`;
      const posted = await postPart(calls, { ...input, replyKey: key }, parts[index]!);
      if (posted !== 'posted') return posted === 'skipped' ? { outcome: 'skipped', progress } : { ...posted, progress };
      progress = { ...progress, posted: index + 1 };
    }
    if (!progress.superseded && input.ts !== null) {
      const done = await supersede(calls, { ...input, ts: input.ts });
      if (done.outcome === 'ratelimited') return { outcome: 'ratelimited', retryAfterMs: done.retryAfterMs, progress };
      progress = { ...progress, superseded: true };
    }
    return { outcome: 'delivered', progress };
  };
}

/** One part as a reply: posted, skipped, or how it failed (a 429 or a final connection error) for the workflow to decide. */
async function postPart(
  calls: SlackCallDeps,
  input: DeliveryInput,
  text: string,
): Promise<'posted' | 'skipped' | { outcome: 'ratelimited'; retryAfterMs: number } | { outcome: 'failed'; error: string }> {
  try {
    const posted = await replyOnce(calls, input, { text });
    return posted.posted ? 'posted' : 'skipped';
  } catch (error) {
    if (!(error instanceof ApplicationFailure) || error.nonRetryable !== true) {
      const delay = error instanceof ApplicationFailure ? error.nextRetryDelay : undefined;
      if (error instanceof ApplicationFailure && /ratelimited$/.test(error.message)) {
        return { outcome: 'ratelimited', retryAfterMs: typeof delay === 'number' ? delay : 1000 };
      }
      throw error;
    }
    return { outcome: 'failed', error: error.message.replace(/^Slack [\w.]+ failed: /, '') };
  }
}

export function createSlackActivities(deps: SlackActivityDeps) {
  const calls = slackCallDeps(deps);
  return {
    slackDisableConnection: disableConnectionActivity(deps),
    slackUninstallConnection: uninstallConnectionActivity(deps),
    slackLinkOrWait: linkOrWaitActivity(deps),
    slackClearPending: clearPendingActivity(deps),
    slackReserveInvocation: reserveInvocationActivity(deps),
    slackReleaseInvocation: releaseInvocationActivity(deps),
    slackPostConnectPrompt: postConnectPromptActivity(deps, calls),
    slackPostEphemeral: postEphemeralActivity(calls),
    slackPostMessage: postMessageActivity(calls),
    slackPostAccepted: postAcceptedActivity(calls),
    slackUpdateProgress: updateProgressActivity(calls),
    slackFinishMessage: finishMessageActivity(calls),
    slackDeliverAnswer: deliverAnswerActivity(calls),
    ...createStreamActivities(deps, calls),
    ...createConversationActivities(deps, calls),
  };
}

/** The activities as the feature's workflow proxies them. */
export type SlackActivities = ReturnType<typeof createSlackActivities>;
