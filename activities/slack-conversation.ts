/**
 * Activities of the conversation (workflows/slack-conversation.ts): a run's thread context, the
 * request ahead of a follow-up in its thread, the member's runtime and breaker before a run starts,
 * Slack's agent surface (status, title, suggested prompts) and the Home tab. Each is idempotent or
 * harmless to repeat. A Slack call here never fails its invocation: what Slack refuses or
 * rate-limits is answered as such, and the workflow carries on without it.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { WorkerDeps } from '../src/app/feature';
import type { RunContextMessage } from '../src/runs/contract';
import { lastRuntimeSeenAt, listRuns, memberBreaker, runtimeOnline, startRunUnderBreaker } from '../src/runs';
import { assistantStatus, isAssistantRefusal, promptsOf } from '../src/slack/assistant';
import { boundContext, contextFromReplies } from '../src/slack/context';
import { findAccountLink } from '../src/slack/links';
import type { SlackSurfaceEvent } from '../src/slack/contract';
import { loadConversations, rememberAssistantRefused } from '../src/slack/conversation-settings';
import { homeView, HOME_RUNS, type HomeRun } from '../src/slack/home';
import { issueConnectGrant } from '../src/slack/link-codes';
import { postableConnection, sendWithin, type SlackCallDeps } from '../src/slack/outbound';
import { pausedText } from '../src/slack/runtime-texts';
import type { SlackSettings } from '../src/slack/settings';
import { connectLinkUrl } from '../src/slack/texts';
import {
  heldThreadMessages,
  keepThreadMessages,
  rememberPermalink,
  requestAhead,
  threadPermalinks,
  threadKeyString,
  type ThreadKey,
} from '../src/slack/threads';
import type { BudgetPriority } from '../src/slack/budget';
import type { SlackApiMethod } from '../src/slack/web-api';

type ConversationDeps = WorkerDeps<SlackSettings>;

/** What Slack gives a commercially distributed app off the Marketplace in one conversations.replies call. */
const REPLIES_LIMIT = 15;

/** How a call of the agent surface or the Home tab went; a refusal is remembered for the connection. */
export type SurfaceOutcome = 'ok' | 'skipped' | 'refused' | 'ratelimited' | 'failed';

/**
 * One call of an assistant method or views.publish within the workspace's budget: skipped where
 * the connection cannot post or Slack refused the assistant methods before; a refusal remembered;
 * a retryable failure other than a rate limit thrown (Temporal retries it).
 */
async function surfaceCall(
  deps: ConversationDeps,
  calls: SlackCallDeps,
  call: { connectionId: string; method: SlackApiMethod; body: Record<string, unknown>; priority: BudgetPriority },
): Promise<SurfaceOutcome> {
  const postable = await postableConnection(deps, call.connectionId);
  if ('skipped' in postable) return 'skipped';
  const assistant = call.method.startsWith('assistant.');
  if (assistant && postable.connection.assistantRefused !== null) return 'refused';
  const result = await sendWithin(calls, postable.connection, call);
  if (result.ok) return 'ok';
  if (result.error === 'ratelimited') return 'ratelimited';
  if (assistant && isAssistantRefusal(result.error)) {
    await rememberAssistantRefused(deps.db, { connectionId: call.connectionId, error: result.error });
    deps.log.warn(
      { connectionId: call.connectionId, method: call.method, error: result.error },
      'slack refused the assistant surface: threads keep to messages',
    );
    return 'refused';
  }
  if (result.retryable) throw ApplicationFailure.create({ message: `Slack ${call.method} failed: ${result.error}`, type: 'SlackApiError' });
  deps.log.warn({ connectionId: call.connectionId, method: call.method, error: result.error }, 'slack surface call refused');
  return 'failed';
}

/**
 * What the service holds of the thread, and, where it may lack messages (it does not hold the
 * thread's first message, or the connection takes no follow-ups and so never saw the replies), what
 * one conversations.replies call gives within the budget. A refusal or a rate limit gives the
 * context held, never a failure.
 */
async function gatherThreadContext(
  deps: ConversationDeps,
  calls: SlackCallDeps,
  input: ThreadKey & { ts: string },
): Promise<RunContextMessage[]> {
  const limits = deps.settings.context;
  if (limits.maxMessages === 0 || limits.maxChars === 0) return [];
  const held = await heldThreadMessages(deps.db, input, { beforeTs: input.ts, limit: limits.maxMessages });
  const sources = [held];
  if (input.threadTs !== input.ts && (await lacksMessages(deps, input, held))) {
    const fetched = await fetchReplies(deps, calls, input);
    if (fetched.length > 0) {
      await keepThreadMessages(deps.db, input, fetched);
      sources.push(fetched);
    }
  }
  return boundContext(sources, input.ts, limits);
}

/** Whether the held messages may miss some: the thread's first message is not among them, or replies are never received. */
async function lacksMessages(deps: ConversationDeps, thread: ThreadKey, held: RunContextMessage[]): Promise<boolean> {
  if (!held.some((m) => m.ts === thread.threadTs)) return true;
  const stored = (await loadConversations(deps.db, [thread.connectionId])).get(thread.connectionId);
  return (stored?.threadFollowUps ?? deps.settings.threadFollowUps) === 'off' && !thread.channel.startsWith('D');
}

async function fetchReplies(
  deps: ConversationDeps,
  calls: SlackCallDeps,
  thread: ThreadKey & { ts: string },
): Promise<RunContextMessage[]> {
  const postable = await postableConnection(deps, thread.connectionId);
  if ('skipped' in postable) return [];
  const body = { channel: thread.channel, ts: thread.threadTs, latest: thread.ts, inclusive: false, limit: REPLIES_LIMIT };
  const result = await sendWithin(calls, postable.connection, { method: 'conversations.replies', body, priority: 'progress' });
  if (!result.ok) {
    deps.log.info({ connectionId: thread.connectionId, error: result.error }, 'slack: thread context without conversations.replies');
    return [];
  }
  return contextFromReplies(result.body, postable.connection.botUserId).filter((m) => m.text.trim() !== '');
}

/** The member's breaker and runtime before a run starts: whether it may start (as the probe, when half-open), and whether a runtime is there. */
async function runGate(deps: ConversationDeps, input: { organizationId: string; memberId: string; runId: string }) {
  const now = Date.now();
  const member = { organizationId: input.organizationId, memberId: input.memberId };
  const { breaker, presenceWindowMs } = deps.settings.runners;
  if (!(await startRunUnderBreaker(deps.db, { ...member, runId: input.runId }, { now, settings: breaker }))) {
    const state = await memberBreaker(deps.db, member, now);
    const phase = state.phase === 'closed' ? 'open' : state.phase;
    return { start: false as const, phase, notice: pausedText({ ...state, phase, now }) };
  }
  const online = await runtimeOnline(deps.db, { ...member, now, windowMs: presenceWindowMs });
  return { start: true as const, online, lastSeenAt: online ? null : await lastRuntimeSeenAt(deps.db, member) };
}

/** The member's Home tab, published (views.publish). */
async function publishHome(deps: ConversationDeps, calls: SlackCallDeps, input: { connectionId: string; teamId: string; user: string }) {
  const now = Date.now();
  const link = await findAccountLink(deps.db, input.connectionId, input.user);
  let facts: Parameters<typeof homeView>[0];
  if (!link) {
    const ttlMs = deps.settings.linkTokenTtlMs;
    const grant = await issueConnectGrant(deps, {
      connectionId: input.connectionId,
      teamId: input.teamId,
      slackUserId: input.user,
      now,
      ttlMs,
    });
    const url = deps.settings.dashboardUrl === undefined ? undefined : connectLinkUrl(deps.settings.dashboardUrl, grant.token);
    facts = {
      link: { linked: false, code: grant.code, ttlMs, ...(url ? { url } : {}) },
      runtime: { online: false, lastSeenAt: null },
      runs: [],
      now,
    };
  } else {
    const member = { organizationId: link.organizationId, memberId: link.memberId };
    const online = await runtimeOnline(deps.db, { ...member, now, windowMs: deps.settings.runners.presenceWindowMs });
    facts = {
      link: { linked: true, memberId: link.memberId },
      runtime: { online, lastSeenAt: online ? null : await lastRuntimeSeenAt(deps.db, member) },
      runs: await homeRuns(deps, calls, { ...member, connectionId: input.connectionId }),
      now,
    };
  }
  return surfaceCall(deps, calls, {
    connectionId: input.connectionId,
    method: 'views.publish',
    body: { user_id: input.user, view: homeView(facts) },
    priority: 'final',
  });
}

/** The member's last runs, each with a link to its thread (Slack's permalink, asked once per thread and kept). */
async function homeRuns(
  deps: ConversationDeps,
  calls: SlackCallDeps,
  member: { organizationId: string; memberId: string; connectionId: string },
): Promise<HomeRun[]> {
  const runs = await listRuns(deps.db, { organizationId: member.organizationId, memberId: member.memberId, limit: HOME_RUNS });
  const threads = runs.flatMap((run) =>
    run.origin?.kind === 'slack' && run.origin.connectionId === member.connectionId
      ? [{ connectionId: member.connectionId, channel: run.origin.channel, threadTs: run.origin.threadTs }]
      : [],
  );
  const known = await threadPermalinks(deps.db, threads);
  for (const thread of threads) {
    const key = threadKeyString(thread);
    if (!known.has(key)) {
      const permalink = await askPermalink(deps, calls, thread);
      if (permalink !== null) known.set(key, permalink);
    }
  }
  return runs.map((run) => {
    const origin = run.origin?.kind === 'slack' && run.origin.connectionId === member.connectionId ? run.origin : undefined;
    const permalink = origin
      ? (known.get(threadKeyString({ connectionId: member.connectionId, channel: origin.channel, threadTs: origin.threadTs })) ?? null)
      : null;
    return { runId: run.id, status: run.status, createdAt: run.createdAt, text: run.input?.text ?? null, permalink };
  });
}

/** chat.getPermalink of a thread's first message, kept on the thread; null when Slack does not give one (within the budget, now). */
async function askPermalink(deps: ConversationDeps, calls: SlackCallDeps, thread: ThreadKey): Promise<string | null> {
  const postable = await postableConnection(deps, thread.connectionId);
  if ('skipped' in postable) return null;
  const result = await sendWithin(calls, postable.connection, {
    method: 'chat.getPermalink',
    body: { channel: thread.channel, message_ts: thread.threadTs },
    priority: 'progress',
  });
  if (!result.ok || typeof result.body.permalink !== 'string') return null;
  await rememberPermalink(deps.db, thread, result.body.permalink);
  return result.body.permalink;
}

/** The connection's suggested prompts in the app's thread: with the thread (legacy assistant experience) or without (agent experience). */
async function publishPrompts(
  deps: ConversationDeps,
  calls: SlackCallDeps,
  input: { connectionId: string; channel: string; threadTs: string | null },
): Promise<SurfaceOutcome> {
  const stored = (await loadConversations(deps.db, [input.connectionId])).get(input.connectionId);
  const body = {
    channel_id: input.channel,
    ...(input.threadTs !== null ? { thread_ts: input.threadTs } : {}),
    prompts: promptsOf(stored?.suggestedPrompts),
  };
  return surfaceCall(deps, calls, {
    connectionId: input.connectionId,
    method: 'assistant.threads.setSuggestedPrompts',
    body,
    priority: 'final',
  });
}

export function createConversationActivities(deps: ConversationDeps, calls: SlackCallDeps) {
  return {
    /** The run's thread context (src/slack/context.ts): what is held, with what Slack adds where needed. */
    slackThreadContext: (input: ThreadKey & { ts: string }) => gatherThreadContext(deps, calls, input),

    /** The unfinished request ahead of this one in its thread, if any. */
    slackRequestAhead: async (input: { connectionId: string; eventId: string; staleAfterMs: number }) =>
      requestAhead(deps.db, { ...input, now: new Date() }),

    /** The member's breaker and runtime, before the run starts. */
    slackRunGate: (input: { organizationId: string; memberId: string; runId: string }) => runGate(deps, input),

    /** The thread's status line while its run works (`tool`: what the run uses), or cleared (`clear`). */
    slackAssistantStatus: (input: ThreadKey & { tool?: string; clear?: boolean }) =>
      surfaceCall(deps, calls, {
        connectionId: input.connectionId,
        method: 'assistant.threads.setStatus',
        body: { channel_id: input.channel, thread_ts: input.threadTs, status: input.clear ? '' : assistantStatus(input.tool) },
        priority: input.clear ? 'final' : 'progress',
      }),

    /** The thread's title, from its first ask. */
    slackAssistantTitle: (input: ThreadKey & { title: string }) =>
      surfaceCall(deps, calls, {
        connectionId: input.connectionId,
        method: 'assistant.threads.setTitle',
        body: { channel_id: input.channel, thread_ts: input.threadTs, title: input.title },
        priority: 'progress',
      }),

    /** A surface a member opened: the app thread's suggested prompts, or their Home tab. */
    slackPublishSurface: (input: { connectionId: string; teamId: string; surface: SlackSurfaceEvent }): Promise<SurfaceOutcome> =>
      input.surface.kind === 'home'
        ? publishHome(deps, calls, { connectionId: input.connectionId, teamId: input.teamId, user: input.surface.user })
        : publishPrompts(deps, calls, {
            connectionId: input.connectionId,
            channel: input.surface.channel,
            threadTs: input.surface.threadTs,
          }),
  };
}
