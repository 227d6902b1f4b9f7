/**
 * Slack events and slash commands: one workflow per (connection, event_id), workflows/slack.ts. Its id,
 * signals, queries, payload types and search attributes, defined once for the routes and the
 * workflow. Deterministic: no I/O, no clocks, no randomness.
 */
import { defineSearchAttributeKey } from '@temporalio/common';
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { RunProgress, RunSettings, RunStatus } from '../runs/contract';
import type { StreamChunk, StreamedText } from './stream';
import type { StreamSegment } from './stream-segments';
import { workflowRef } from '../app/temporal/contract';

export const slackSearchAttributes = {
  ConnectionId: defineSearchAttributeKey('ConnectionId', 'KEYWORD'),
  SlackUserId: defineSearchAttributeKey('SlackUserId', 'KEYWORD'),
  SlackEventStatus: defineSearchAttributeKey('SlackEventStatus', 'KEYWORD'),
} as const;

/**
 * Workflow patch id (`patched()`): the link decision reads the recorded link rather than how the
 * wait ended; events waiting for a link before this replay the way they ran.
 */
export const LINK_DECISION_PATCH = 'link-decision-reads-link';

/**
 * Workflow patch id: Postgres records as local activities first; events started
 * before it replay with regular activities.
 */
export const SLACK_LOCAL_RECORDS_PATCH = 'slack-local-records';

/**
 * Workflow patch id: one message per invocation, posted when the run starts, kept current by the
 * run's progress and replaced by the answer; events before it post the answer alone at the end.
 */
export const SLACK_PROGRESS_PATCH = 'slack-progress';

/**
 * Workflow patch id: the member's slot is freed when the run closes; the answer always lands
 * (a refused final edit goes as new replies, rate limits wait on timers until
 * `finalDeliveryDeadlineMs`); the answer may stream (chat.startStream). Events before it free the
 * slot after the last edit and end `reply_failed` on a refused one.
 */
export const SLACK_ANSWER_PATCH = 'slack-answer-lands';

/**
 * Workflow patch id: `app_uninstalled` marks the connection uninstalled, removes its member links
 * and ends its waiting invocations (slackUninstallConnection) instead of only disabling it; an
 * invocation whose connection is uninstalled or removed while it is on its way ends
 * `connection_removed` with the reason (the slackConnectionRemoved signal, or what its Postgres
 * records found). Events before it disable the connection and keep waiting out the link.
 */
export const SLACK_REMOVAL_PATCH = 'slack-connection-removal';

export function slackEventWorkflowId(connectionId: string, eventId: string): string {
  return `slack-event/${connectionId}/${eventId}`;
}

/**
 * The workflow of one message that asks in a channel of a connection that takes follow-ups, keyed
 * on the message, not on the event: Slack then delivers a mention twice, as `app_mention` and as
 * `message`, with different event ids. Whichever arrives first starts it; the other, and every
 * retry, finds it there (REJECT_DUPLICATE).
 */
export function slackMessageWorkflowId(connectionId: string, channel: string, ts: string): string {
  return `slack-message/${connectionId}/${channel}/${ts}`;
}

/**
 * Workflow patch id: a thread is a conversation. The run carries the thread's earlier messages as
 * its context; a follow-up waits for the request ahead of it in its thread (the thread says it is
 * queued); an assistant thread shows the run's status and gets its title from the first ask.
 * Events before it start the run with the text alone.
 */
export const SLACK_CONVERSATION_PATCH = 'slack-conversation';

/**
 * Workflow patch id: before its run starts, an invocation asks the member's breaker (a paused
 * member gets a notice and no run; a half-open one runs as the probe) and whether a runtime of
 * theirs is online (if not, its first message says so, and becomes the usual progress once a
 * runtime claims the run). Events before it start the run at once.
 */
export const SLACK_RUNTIME_GATE_PATCH = 'slack-runtime-gate';

/** Whether a thread reply without a mention is for the bot: never, from the thread's asker, or from any linked member. */
export type ThreadFollowUps = 'off' | 'asker' | 'members';

/** A mention or DM that asks the member's runtime for something. Only the fields we use. */
export interface SlackInvocation {
  type: 'app_mention' | 'message';
  user: string;
  channel: string;
  /** `im` for DMs; absent on app_mention. */
  channelType: string | null;
  ts: string;
  threadTs: string | null;
  text: string;
  /** The asker's own workspace when it is not the connection's (a channel shared with another organization); absent in older events. */
  userTeam?: string | null;
  /** A channel thread's reply without a mention, routed because the thread is a conversation (ThreadFollowUps). */
  followUp?: boolean;
}

/**
 * A surface of the app a member opened: the app's thread (`prompts`: its suggested prompts, with the
 * thread for the legacy assistant experience, without one for the agent experience) or its Home tab.
 */
export type SlackSurfaceEvent =
  { kind: 'prompts'; user: string; channel: string; threadTs: string | null } | { kind: 'home'; user: string };

export type SlackLifecycleType = 'app_uninstalled' | 'tokens_revoked';

/** Settings fixed by the front door at start (workflows cannot read config). */
interface SlackEventSettings {
  linkWaitMs: number;
  /** The least time between two edits of the invocation's message; absent in events started before it. */
  progressIntervalMs?: number;
  memberDailyInvocations: number;
  memberConcurrentRuns: number;
  run: RunSettings;
  /** How the answer reaches the thread (SLACK_REPLY_MODE); absent in events started before it (edit). */
  replyMode?: 'auto' | 'stream' | 'edit';
  /** How long a final answer keeps waiting out rate limits (SLACK_FINAL_DELIVERY_DEADLINE); absent before it. */
  finalDeliveryDeadlineMs?: number;
  /** The history length past which the invocation continues as new while it follows its run (SLACK_CONTINUE_AS_NEW_EVENTS). */
  continueAsNewEvents?: number;
  /** When a streamed reply is stopped and the answer carries on in the next (SLACK_STREAM_MAX_AGE, SLACK_STREAM_MAX_BYTES); absent before them. */
  streamMaxAgeMs?: number;
  streamMaxBytes?: number;
}

/**
 * What an invocation that continued as new while following its run carries: the run, its thread
 * and message, how far progress was shown, and the held slot. The run is no longer its child.
 */
export interface SlackFollowing {
  member: { organizationId: string; memberId: string };
  runId: string;
  threadTs: string;
  replyKey: string;
  view: SlackThreadView;
  shown: number;
  nextAt: number;
  progress: RunProgress | null;
  state: SlackEventState;
  /** An assistant thread (SLACK_CONVERSATION_PATCH): its status line shows the run's tool; absent before it. */
  assistant?: { tool: string | null };
}

/** The thread as an invocation keeps it: its first message, and the stream the answer goes to, if any. */
export interface SlackThreadView {
  ts: string | null;
  /** `stream` or `auto` (SLACK_REPLY_MODE): the answer streams unless Slack refuses. */
  streaming: boolean;
  /** `stream`: try it even where a refusal was remembered for the connection. */
  force: boolean;
  stream: {
    /** The streamed reply written to now (with segments, the newest). */
    ts: string;
    streamed: StreamedText;
    openTask: string | null;
    /** The segment `ts` is (src/slack/stream-segments.ts); absent in streams opened before SLACK_STREAM_SEGMENTS_PATCH. */
    segment?: StreamSegment;
    /** What the newest progress still has to append, escaped, when a wait cut its step short. */
    pending?: { markdown: string; chunks: StreamChunk[] };
    /** Once Slack refused to grow a segment: the most a segment holds from then on, in UTF-8 bytes. */
    maxBytes?: number;
  } | null;
  /** Slack refused the stream, or it broke: edits from here on. */
  streamOff: boolean;
  /** The first message says no runtime of the member's is online (SLACK_RUNTIME_GATE_PATCH), until a runtime claims the run. */
  notice?: 'no_runtime' | null;
}

/**
 * Workflow patch id: an invocation whose run tells its end (RUN_TELLS_END_PATCH) continues as new
 * past SLACK_CONTINUE_AS_NEW_EVENTS (or when Temporal suggests it) while it follows the run.
 */
export const SLACK_CONTINUE_AS_NEW_PATCH = 'slack-continue-as-new';

/**
 * Workflow patch id: the streamed answer goes in segments (src/slack/stream-segments.ts): a
 * streamed reply is stopped before SLACK_STREAM_MAX_AGE or SLACK_STREAM_MAX_BYTES and the answer
 * carries on in a new one in the same thread; one Slack closed first (`message_not_in_streaming_state`)
 * is repaired with chat.update and the answer carries on; one Slack will not grow (`msg_too_long`)
 * is stopped and the answer carries on. Events before it append to one stream to the end, and
 * fall back to edits and replies when Slack refuses an append.
 */
export const SLACK_STREAM_SEGMENTS_PATCH = 'slack-stream-segments';

export interface SlackEventInput {
  connectionId: string;
  organizationId: string;
  teamId: string;
  eventId: string;
  receivedAt: number;
  settings: SlackEventSettings;
  /** Exactly one of these is set (a worker from before `surface` does nothing with one). */
  invocation?: SlackInvocation;
  lifecycle?: { type: SlackLifecycleType };
  surface?: SlackSurfaceEvent;
  /** Set only by the invocation itself when it continues as new while following its run. */
  following?: SlackFollowing;
}

/** Values of the SlackEventStatus search attribute, in the order an invocation goes through them. */
export type SlackEventStatus =
  | 'received'
  | 'awaiting_link'
  | 'link_expired'
  | 'limited'
  | 'run_created'
  | 'replied'
  | 'reply_skipped'
  | 'reply_failed'
  | 'connection_disabled'
  | 'connection_removed'
  | 'cancelled'
  | 'paused';

export interface SlackEventState {
  status: SlackEventStatus;
  memberId: string | null;
  runId: string | null;
  runStatus: RunStatus | null;
  /** Why a limit or a post stopped the invocation, when one did. */
  detail: string | null;
}

/** Sent by the account-link route to invocations waiting for this Slack user's link. */
export interface SlackAccountLinked {
  slackUserId: string;
  organizationId: string;
  memberId: string;
}

export const slackAccountLinkedSignal = defineSignal<[SlackAccountLinked]>('slackAccountLinked');

/** Why an invocation's connection is gone: Slack uninstalled the app, or an admin removed the connection. */
export type SlackConnectionRemovalReason = 'app_uninstalled' | 'connection_deleted';

/** Sent to invocations waiting for a link when their connection is uninstalled or removed: they end `connection_removed`. */
export const slackConnectionRemovedSignal = defineSignal<[{ reason: SlackConnectionRemovalReason }]>('slackConnectionRemoved');
export const slackEventStateQuery = defineQuery<SlackEventState>('slackEventState');

/** Sent to the invocations of a thread when a request in it ends: a queued follow-up looks again whether it may start. */
export const slackThreadTurnSignal = defineSignal('slackThreadTurn');

/** The workflow of one Slack event (workflows/slack.ts). */
export const slackEventWorkflow = workflowRef<[SlackEventInput], SlackEventState>('slackEvent');
