/**
 * Automation runs: one actor workflow per (organization, run id), workflows/runs.ts.
 * Every message between the front door and that workflow, defined once: its id, signals,
 * queries, payload types and search attributes. The routes and the workflow both import this
 * module, so it stays deterministic: no I/O, no clocks, no randomness.
 */
import { ApplicationFailure, defineSearchAttributeKey } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { workflowRef } from '../app/temporal/contract';

/** Filters for the Temporal Web UI (registered at start-up, see src/app/temporal/search-attributes.ts). */
export const runSearchAttributes = {
  RunStatus: defineSearchAttributeKey('RunStatus', 'KEYWORD'),
  OrgId: defineSearchAttributeKey('OrgId', 'KEYWORD'),
  RunAttempt: defineSearchAttributeKey('RunAttempt', 'INT'),
} as const;

export const RUN_EVENT_TYPES = ['user', 'assistant', 'capability_search', 'capability_execution', 'usage', 'warning', 'terminal'] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

export const RUN_STATUSES = ['queued', 'running', 'awaiting_retry', 'succeeded', 'failed', 'cancelled', 'timed_out', 'skipped'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
const CLOSED_RUN_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'cancelled', 'timed_out', 'skipped'];
export const isClosedRunStatus = (status: string): boolean => (CLOSED_RUN_STATUSES as readonly string[]).includes(status);

/** `payload.status` values a `terminal` event may carry (default `succeeded`). */
export const TERMINAL_EVENT_STATUSES = ['succeeded', 'failed', 'cancelled'] as const;

/**
 * Why a run failed, as its runtime says in a failed terminal (`payload.failure`) or completion:
 * `runtime`, the runtime broke (the command crashed or exited without an answer, the runner failed
 * on its own); `task`, the work itself failed and the runtime answered. It decides whether the
 * failure counts toward the member's breaker (src/runs/breaker.ts).
 */
export const RUN_FAILURE_KINDS = ['runtime', 'task'] as const;
export type RunFailureKind = (typeof RUN_FAILURE_KINDS)[number];

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

/**
 * Who sends a report or a claim: the run decides from it whether the caller may reach it, with
 * the API's visibility rule (a member reaches only its own runs; owners and admins every run of
 * the organization). Absent only in histories recorded before reports carried it.
 */
export interface RunCaller {
  memberId: string;
  admin: boolean;
}

/** The refusal a run answers a caller who may not reach it: the API's 404 for a run it cannot see. */
export const RUN_NOT_FOUND = 'not_found';

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
interface RunOrigin {
  kind: 'slack';
  connectionId: string;
  teamId: string;
  channel: string;
  threadTs: string;
  slackUserId: string;
}

/** One earlier message of the conversation a run was asked in (a Slack thread), oldest first in `RunInput.context`. */
export interface RunContextMessage {
  /** Who wrote it: a Slack user id, or null when unknown. */
  userId: string | null;
  /** Written by a bot: the service's own answers, and other apps'. */
  bot: boolean;
  text: string;
  /** Slack's id of the message (seconds.micros), which orders the thread. */
  ts: string;
}

/** What a run was asked: the text, and (Slack threads) the conversation before it. */
export interface RunInput {
  text: string;
  context?: RunContextMessage[];
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
  input?: RunInput;
  /**
   * How a run started as a child tells its parent its progress (RUN_PROGRESS_THROTTLE_PATCH): at
   * most one signal per `intervalMs`, the newest state, its text cut to `maxChars`. Absent in runs
   * started before it.
   */
  progress?: { intervalMs: number; maxChars: number };
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
  input?: RunInput;
  /** `payload.text` of the last applied `assistant` event, for replying to where the run came from. */
  lastAssistantText?: string | null;
  /** Reports the run received but did not apply, by reason (see src/runs/state.ts). */
  ignoredEvents?: RunIgnoredCounts;
  /** Attempts start only through a claim (queued runs); reports of any other attempt are refused. */
  claimRequired?: boolean;
  /** The run's own lease (its settings), in the row: the API coalesces its heartbeats by it. */
  leaseTimeoutMs?: number;
  /** Applied events not yet in Postgres (the query's answer; the API refuses new events past a bound). */
  unpersisted?: { events: number; bytes: number };
  /** Someone asked the run to stop (requestRunCancelUpdate); its runtime learns it from the heartbeat reply. */
  cancelRequested?: { at: number; reason: string | null; memberId: string } | null;
  /**
   * A run its terminal event (or completion) ended `failed`: what failed, as the runtime said, else
   * `task` when it answered (an `assistant` text or a `result`) and `runtime` when it did not.
   */
  failure?: RunFailureKind;
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

/** What a claim asks: nothing; who asks travels beside it (RunCaller). */
export type RunClaimRequest = Record<string, never>;

export interface RunClaim {
  run: RunSummary;
  /** The attempt the claim started: report with it. */
  attempt: number;
  leaseExpiresAt: number;
}

/**
 * Workflow patch ids (`patched()`): behaviour added while runs were live, so histories recorded
 * before it replay the way they ran. See docs/architecture.md, "Changing a workflow".
 */
export const RUN_CLAIMS_PATCH = 'run-claims';
/** A run whose outcome is a failure ends its workflow Failed instead of Completed (see runOutcomeFailure). */
export const RUN_OUTCOME_PATCH = 'run-outcome-failure';
/** Executions that recorded it ignore another member's heartbeat; those before it applied every heartbeat. */
export const RUN_CALLER_PATCH = 'run-caller-heartbeats';

/**
 * ApplicationFailure types of the run outcomes that end the workflow Failed, so the Web UI and
 * `ExecutionStatus = 'Failed'` tell them from successes at a glance. `cancelled` is not among
 * them: it is a decision (the runtime's or an operator's), not a fault, and stays Completed.
 */
export const RUN_FAILURE_TYPES: Partial<Record<RunStatus, string>> = {
  failed: 'RunFailed',
  timed_out: 'RunTimedOut',
  skipped: 'RunSkipped',
};

/**
 * The failure a run's workflow ends with for this final summary, or undefined when it completes.
 * Non-retryable (a run never starts again under its id), with the summary as its one detail, so
 * whoever awaits the workflow still gets the outcome (runSummaryOfFailure).
 */
export function runOutcomeFailure(summary: RunSummary): ApplicationFailure | undefined {
  const type = RUN_FAILURE_TYPES[summary.status];
  if (type === undefined) return undefined;
  return ApplicationFailure.create({
    type,
    message: `run ${summary.status}: ${summary.error ?? 'no error given'}`,
    nonRetryable: true,
    details: [summary],
  });
}

/**
 * The summary a failed run's workflow carries, from the error awaiting it raised (a client's
 * WorkflowFailedError, a parent's ChildWorkflowFailure, or the ApplicationFailure itself): its
 * cause chain holds the run's failure. Undefined for any other error.
 */
export function runSummaryOfFailure(error: unknown): RunSummary | undefined {
  const types = Object.values(RUN_FAILURE_TYPES);
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth++) {
    if (!(cause instanceof ApplicationFailure) || !types.includes(cause.type ?? '')) continue;
    const summary = cause.details?.[0] as RunSummary | undefined;
    return summary && typeof summary === 'object' && typeof summary.status === 'string' ? summary : undefined;
  }
  return undefined;
}

/** Failure type of a run batch Postgres will never take (a data or constraint error): set apart, not retried. */
export const PERSIST_REJECTED = 'PersistRejected';

/** ApplicationFailure types of a refused claim (the validator's answer), mapped to 409 bodies. */
export const CLAIM_REFUSALS = ['already_claimed', 'run_closed'] as const;

/** ApplicationFailure types of a refused event (the `reportRunEvent` validator's answer); see eventVerdict. */
export const EVENT_REFUSALS = [
  'duplicate',
  'run_closed',
  'attempt_out_of_range',
  'stale_attempt',
  'not_claimed',
  'sequence_out_of_window',
  'buffer_full',
  'after_terminal',
  'terminal_not_last',
] as const;

/** What an accepted event became: applied now (and any buffered ones it released), or buffered for its gap. */
export interface RunEventAck {
  disposition: 'applied' | 'buffered';
  status: RunStatus;
}

/**
 * Events arrive as this Update: its validator decides before the ack, so a report
 * answered 200 is applied or kept. The signal stays for histories recorded before it.
 */
export const reportRunEventUpdate = defineUpdate<RunEventAck, [RunEventReport, RunCaller?]>('reportRunEvent');
/** Events as signals, from before the `reportRunEvent` Update: kept so runs live across that deploy still take them. */
export const runEventSignal = defineSignal<[RunEventReport]>('runEvent');
export const runHeartbeatSignal = defineSignal<[RunHeartbeat, RunCaller?]>('runHeartbeat');
export const runSummaryQuery = defineQuery<RunSummary>('runSummary');
/**
 * A request to stop a run, from its member or an admin: through the API's cancel route or a Slack
 * Cancel button. Who asks travels beside it (RunCaller), as for reports and claims.
 */
export interface RunCancelRequest {
  reason?: string;
  /** When the front door received it (ms), stamped by the server. */
  requestedAt: number;
}

/** What a cancel request did: a queued run closes `cancelled` at once; a claimed one waits for its runtime. */
export interface RunCancelAck {
  status: RunStatus;
  cancelRequested: boolean;
}

/** The validator refuses a caller who may not reach the run (RUN_NOT_FOUND) and a run already closed (`run_closed`). */
export const requestRunCancelUpdate = defineUpdate<RunCancelAck, [RunCancelRequest, RunCaller]>('requestRunCancel');

/**
 * What a run started as a child (a Slack invocation) tells its parent as it works, so the parent
 * keeps its message current without polling: the newest answer text, or the tool it is using.
 * `sequence` grows with each signal, so the parent keeps only the newest.
 */
export interface RunProgress {
  runId: string;
  sequence: number;
  text?: string;
  tool?: string;
  /** The run will send its summary (runEndedSignal) when it ends: its parent may continue as new meanwhile. */
  tellsEnd?: boolean;
}
export const runProgressSignal = defineSignal<[RunProgress]>('runProgress');

/** A child run tells its parent that a runtime claimed it (RUN_TELLS_CLAIM_PATCH): the parent's "no runtime" notice becomes progress. */
export const runClaimedSignal = defineSignal<[{ runId: string; attempt: number }]>('runClaimed');

/** Workflow patch id: a child run signals its parent (runClaimedSignal) when a claim starts an attempt; runs before it told nothing. */
export const RUN_TELLS_CLAIM_PATCH = 'run-tells-claim';

/**
 * A child run's last word to its parent (RUN_TELLS_END_PATCH), sent to the parent's workflow id
 * alone, so it reaches the parent's current execution after a continue-as-new, which no longer
 * holds the child's handle.
 */
export const runEndedSignal = defineSignal<[RunSummary]>('runEnded');

/**
 * Workflow patch id: a child run sends its progress to its parent's workflow id (not to the
 * execution that started it), marks it `tellsEnd`, and sends its summary when it ends.
 */
export const RUN_TELLS_END_PATCH = 'run-tells-end';

/**
 * A runtime's completion of its attempt (`POST /v1/automation-runs/{id}/complete`): the run takes it
 * as a `terminal` event with the next sequence of the attempt, after every event it already holds
 * (src/runs/completion.ts). `result` is kept in that event's payload.
 */
export interface RunCompletion {
  attempt: number;
  status: (typeof TERMINAL_EVENT_STATUSES)[number];
  error?: string;
  failure?: RunFailureKind;
  result?: unknown;
  /** When the front door received it (ms), stamped by the server. */
  receivedAt: number;
}

/** What a completion did: closed the run (`status` its final one), or wait in the buffer for earlier events (`buffered`, still `running`). */
export type RunCompleteAck = RunEventAck;

/** The validator refuses as it would a terminal event with the next sequence (EVENT_REFUSALS), or a caller who may not reach the run. */
export const completeRunUpdate = defineUpdate<RunCompleteAck, [RunCompletion, RunCaller]>('completeRun');

/** Exclusive claim: the validator refuses unless the run waits for an attempt. */
export const claimRunUpdate = defineUpdate<RunClaim, [RunClaimRequest, RunCaller?]>('claimRun');

/** One automation run's actor (workflows/runs.ts). */
export const automationRunWorkflow = workflowRef<[RunWorkflowInput], RunSummary>('automationRun');

/**
 * The Temporal priority key runs start with: 1, the highest (the server's default is 3, which
 * every other workflow keeps). A live run's tasks then go before new deliveries and events when
 * the task queue has a backlog; the key is the workflow's, so its signals' tasks carry it too.
 */
export const RUN_PRIORITY_KEY = 1;
