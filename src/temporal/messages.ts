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
}

export const runEventSignal = defineSignal<[RunEventReport]>('runEvent');
export const runHeartbeatSignal = defineSignal<[RunHeartbeat]>('runHeartbeat');
export const runSummaryQuery = defineQuery<RunSummary>('runSummary');

// ---------------------------------------------------------------------------------------
// Slack (spec 4.1, 4.6): one workflow per (connection, event_id).

export function slackEventWorkflowId(connectionId: string, eventId: string): string {
  return `slack-event/${connectionId}/${eventId}`;
}

// ---------------------------------------------------------------------------------------
// GitHub (spec 4.5): one workflow per delivery.

export function githubDeliveryWorkflowId(deliveryId: string): string {
  return `github-delivery/${deliveryId}`;
}

// ---------------------------------------------------------------------------------------
// MCP resolve (spec 4.2): a short probe workflow per request.

export function mcpResolveWorkflowId(requestId: string): string {
  return `mcp-resolve/${requestId}`;
}

// ---------------------------------------------------------------------------------------
// Platform smoke test: a trivial workflow that proves the worker round trip.

export function pingWorkflowId(id: string): string {
  return `ping/${id}`;
}
