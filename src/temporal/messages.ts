/**
 * Every message between the front door and the workflows, defined once: task queue,
 * workflow ids, signals, queries, their payload types and the custom search attributes.
 * Both the routes (client side) and the workflow code import this module, so it must stay
 * deterministic: no I/O, no clocks, no randomness.
 */
import { defineSearchAttributeKey } from '@temporalio/common';
import { defineQuery, defineSignal } from '@temporalio/workflow';

/** The default task queue. Deployments may override it with TEMPORAL_TASK_QUEUE. */
export const DEFAULT_TASK_QUEUE = 'control-plane';

/**
 * Custom search attributes, so operators can filter in the Temporal Web UI. The embedded
 * dev server registers them with `--search-attribute`; production registers them at start-up.
 */
export const searchAttributes = {
  RunStatus: defineSearchAttributeKey('RunStatus', 'KEYWORD'),
  OrgId: defineSearchAttributeKey('OrgId', 'KEYWORD'),
  RunAttempt: defineSearchAttributeKey('RunAttempt', 'INT'),
  ConnectionId: defineSearchAttributeKey('ConnectionId', 'KEYWORD'),
  SlackUserId: defineSearchAttributeKey('SlackUserId', 'KEYWORD'),
  SlackEventStatus: defineSearchAttributeKey('SlackEventStatus', 'KEYWORD'),
  GithubEvent: defineSearchAttributeKey('GithubEvent', 'KEYWORD'),
  GithubDeliveryId: defineSearchAttributeKey('GithubDeliveryId', 'KEYWORD'),
  GithubRepository: defineSearchAttributeKey('GithubRepository', 'KEYWORD'),
} as const;

// ---------------------------------------------------------------------------------------
// Automation runs (spec 4.3, 4.4): one actor workflow per (organization, run id).

export const RUN_EVENT_TYPES = [
  'user',
  'assistant',
  'capability_search',
  'capability_execution',
  'usage',
  'warning',
  'terminal',
] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

export const RUN_STATUSES = [
  'queued',
  'running',
  'awaiting_retry',
  'succeeded',
  'failed',
  'cancelled',
  'timed_out',
  'skipped',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const CLOSED_RUN_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'cancelled', 'timed_out', 'skipped'];
export const isClosedRunStatus = (status: string): boolean => (CLOSED_RUN_STATUSES as readonly string[]).includes(status);

/** `payload.status` values a `terminal` event may carry (default `succeeded`). */
export const TERMINAL_EVENT_STATUSES = ['succeeded', 'failed', 'cancelled'] as const;
export type TerminalEventStatus = (typeof TERMINAL_EVENT_STATUSES)[number];

/** The workflow type name of workflows/automation-run.ts (the Slack feature starts it as a child by name). */
export const RUN_WORKFLOW_TYPE = 'automationRun';

/** The organization is part of the id so two organizations can use the same run id. */
export function runWorkflowId(organizationId: string, runId: string): string {
  return `automation-run/${organizationId}/${runId}`;
}

export interface RunEventReport {
  attempt: number;
  sequence: number;
  type: RunEventType;
  payload: Record<string, unknown>;
  /** The client's timestamp (ms). Kept for the record; ordering uses `sequence`. */
  createdAt: number;
  /** When the front door received it (ms), stamped by the server. */
  receivedAt: number;
}

export interface RunHeartbeat {
  attempt: number;
  receivedAt: number;
}

/** Liveness and size settings, fixed when the run starts so a deployment change can't reshape it midway. */
export interface RunSettings {
  leaseTimeoutMs: number;
  maxAttempts: number;
  retryWindowMs: number;
  maxDurationMs: number;
  claimDeadlineMs: number;
  continueAsNewEvents: number;
  eventBufferMax: number;
}

/** Where a run came from, when something other than its runtime created it (a Slack invocation). */
export interface RunOrigin {
  kind: 'slack';
  connectionId: string;
  teamId: string;
  channel: string;
  threadTs: string;
  slackUserId: string;
}

export interface RunWorkflowInput {
  organizationId: string;
  runId: string;
  /** `queued` waits for a runtime to claim it (Slack routing); `running` is a runtime's own report. */
  initialStatus: 'queued' | 'running';
  createdAt: number;
  settings: RunSettings;
  memberId?: string;
  origin?: RunOrigin;
  input?: { text: string };
  /** Compact state carried across continue-as-new. Opaque to callers. */
  carried?: unknown;
}

export interface RunSummary {
  id: string;
  organizationId: string;
  status: RunStatus;
  attempt: number;
  createdAt: number;
  startedAt: number | null;
  endedAt: number | null;
  lastHeartbeatAt: number | null;
  leaseExpiresAt: number | null;
  eventCount: number;
  countsByType: Partial<Record<RunEventType, number>>;
  usage: Record<string, number>;
  error: string | null;
  memberId?: string;
  origin?: RunOrigin;
  input?: { text: string };
  /** `payload.text` of the last applied `assistant` event, for replying to where the run came from. */
  lastAssistantText?: string | null;
  /** Reports the run received but did not apply, by reason (see workflows/automation-run-state.ts). */
  ignoredEvents?: RunIgnoredCounts;
}

export interface RunIgnoredCounts {
  /** Same (attempt, sequence) as an applied or buffered event. */
  duplicate: number;
  /** An older attempt, or the current attempt after its lease was lost. */
  stale: number;
  /** An attempt above the run's maxAttempts. */
  rejected: number;
  /** Dropped because the out-of-order buffer was full (the furthest-ahead event goes). */
  overflow: number;
  /** Arrived after the run had ended (a late signal that raced the close). */
  afterClose: number;
}

export const runEventSignal = defineSignal<[RunEventReport]>('runEvent');
export const runHeartbeatSignal = defineSignal<[RunHeartbeat]>('runHeartbeat');
export const runSummaryQuery = defineQuery<RunSummary>('runSummary');

// ---------------------------------------------------------------------------------------
// Slack (spec 4.1, 4.6): one workflow per (connection, event_id).

export function slackEventWorkflowId(connectionId: string, eventId: string): string {
  return `slack-event/${connectionId}/${eventId}`;
}

/** The workflow type the events route starts (workflows/slack-event.ts). */
export const SLACK_EVENT_WORKFLOW = 'slackEvent';

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
}

export type SlackLifecycleType = 'app_uninstalled' | 'tokens_revoked';

/** Settings fixed by the front door at start (workflows cannot read config). */
export interface SlackEventSettings {
  linkWaitMs: number;
  memberDailyInvocations: number;
  memberConcurrentRuns: number;
  run: RunSettings;
}

export interface SlackEventInput {
  connectionId: string;
  organizationId: string;
  teamId: string;
  eventId: string;
  receivedAt: number;
  settings: SlackEventSettings;
  /** Exactly one of the two is set. */
  invocation?: SlackInvocation;
  lifecycle?: { type: SlackLifecycleType };
}

/** Values of the SlackEventStatus search attribute, in the order an invocation goes through them. */
export const SLACK_EVENT_STATUSES = [
  'received',
  'awaiting_link',
  'link_expired',
  'limited',
  'run_created',
  'replied',
  'reply_skipped',
  'reply_failed',
  'connection_disabled',
] as const;
export type SlackEventStatus = (typeof SLACK_EVENT_STATUSES)[number];

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
export const slackEventStateQuery = defineQuery<SlackEventState>('slackEventState');

// ---------------------------------------------------------------------------------------
// GitHub (spec 4.5): one workflow per delivery.

export function githubDeliveryWorkflowId(deliveryId: string): string {
  return `github-delivery/${deliveryId}`;
}

export interface GithubRepositoryRef {
  id: number;
  /** `owner/name`, as GitHub sent it. */
  fullName: string;
}

/**
 * The compact, already-classified delivery the workflow works on. Never the raw payload: a
 * push can be 25 MB and Temporal payloads fail at 2 MB.
 */
export type GithubDeliveryInput = { deliveryId: string; receivedAt: number } & (
  | { event: 'push'; action: null; installationId: number; repository: GithubRepositoryRef; ref: string; headSha: string }
  | { event: 'installation'; action: 'deleted' | 'suspend' | 'unsuspend'; installationId: number }
  | {
      event: 'installation_repositories';
      action: 'added' | 'removed';
      installationId: number;
      repositories: GithubRepositoryRef[];
    }
  | {
      event: 'repository';
      action: 'renamed' | 'deleted' | 'transferred';
      /** Null when the hook is a repository webhook rather than an App's. */
      installationId: number | null;
      repository: GithubRepositoryRef;
      /** The names the repository had before (renamed: old name; transferred: old owner). */
      previousFullNames: string[];
    }
);

export type GithubEventName = GithubDeliveryInput['event'];

export interface GithubSyncEventRecord {
  id: string;
  targetId: string | null;
  status: 'queued' | 'skipped';
  outcome: string | null;
  /** False when an equal event (same target and head, or same delivery) already existed. */
  created: boolean;
}

export interface GithubTargetChange {
  targetId: string;
  field: 'status' | 'repositoryFullName';
  from: string;
  to: string;
}

/** The workflow's result: what the delivery changed, for operators. */
export interface GithubDeliverySummary {
  deliveryId: string;
  event: GithubEventName;
  action: string | null;
  syncEvents: GithubSyncEventRecord[];
  targetChanges: GithubTargetChange[];
  /** installation_repositories: repositories recorded as available (added) or removed. */
  repositoriesRecorded: number;
}

// ---------------------------------------------------------------------------------------
// MCP resolve (spec 4.2): a short probe workflow per request.

export function mcpResolveWorkflowId(requestId: string): string {
  return `mcp-resolve/${requestId}`;
}

/** The workflow type (workflows/mcp-resolve.ts) and its one activity (activities/mcp.ts). */
export const MCP_RESOLVE_WORKFLOW = 'mcpResolve';

/** The payload types are defined with the feature (src/mcp/types.ts), once, and re-exported here. */
export type {
  McpResolveInput,
  McpResolveResponse as McpResolveResult,
  McpProbeInput,
  McpProbeResult,
} from '../mcp/types';

/** Failure type of a probe attempt that died on a connection reset: the only retried failure. */
export const MCP_CONNECTION_RESET = 'McpConnectionReset';

// ---------------------------------------------------------------------------------------
// Platform smoke test: a trivial workflow that proves the worker round trip.

export function pingWorkflowId(id: string): string {
  return `ping/${id}`;
}
