/**
 * One actor workflow per automation run. The front door sends it events (an Update), heartbeats
 * (a signal) and claims (an Update); it owns ordering, dedupe, state and liveness. The rules live
 * in src/runs/state.ts as pure functions; this file only wires them to handlers, a moving
 * deadline and persistence.
 *
 * Two loops run side by side, so a slow Postgres never delays a lease deadline:
 * - the liveness loop sleeps until the next deadline with `condition(fn, remainingMs)`, waking
 *   early when the status or attempt changes, or when the deadline moved later by a quarter of
 *   the lease or more (src/runs/state.ts, deadlineMovedOn): the timer is then set again in the
 *   workflow task that moved it, so it fires when the lease really ends. Smaller moves do not
 *   wake it: the deadline only ever moves later, so the loop re-reads it when its timer fires;
 * - the sync loop appends applied events to Postgres in order (then forgets their bodies) and
 *   keeps the `automation_runs` row and the search attributes current at every transition.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  isCancellation,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  log,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
  metricMeter,
  patched,
  proxySinks,
  sleep,
} from '@temporalio/workflow';
import type { MetricCounter } from '@temporalio/common';
import type { ActivityOptions } from '@temporalio/workflow';
import type { RunActivities } from '../activities/runs';
import { byName, localFirst } from './local-first';
import { forLog } from '../src/runs/log-text';
import {
  PERSIST_REJECTED,
  RUN_CALLER_PATCH,
  RUN_CLAIMS_PATCH,
  RUN_NOT_FOUND,
  RUN_OUTCOME_PATCH,
  RUN_TELLS_CLAIM_PATCH,
  RUN_TELLS_END_PATCH,
  claimRunUpdate,
  completeRunUpdate,
  reportRunEventUpdate,
  requestRunCancelUpdate,
  runEventSignal,
  runHeartbeatSignal,
  runOutcomeFailure,
  runClaimedSignal,
  runEndedSignal,
  runProgressSignal,
  runSearchAttributes,
  runSummaryQuery,
  type RunCancelRequest,
  type RunCaller,
  type RunClaimRequest,
  type RunCompletion,
  type RunEventAck,
  type RunEventReport,
  type RunHeartbeat,
  type RunProgress,
  type RunSettings,
  type RunSummary,
  type RunWorkflowInput,
} from '../src/runs/contract';
import {
  applyHeartbeat,
  callerMayReach,
  applyCancel,
  cancelVerdict,
  canCarry,
  applyClaim,
  claimVerdict,
  commitOutbox,
  compactState,
  decideEvent,
  initialState,
  isClosed,
  deadlineMovedOn,
  nextDeadline,
  outboxBatch,
  applyCancelRequest,
  summaryOf,
  tick,
  unpersistedOf,
  type RunState,
} from '../src/runs/state';
import { completionEvent, decideCompletion } from '../src/runs/completion';
import { implementsWorkflow, type EngineDelaySinks } from '../src/app/temporal/contract';
import { automationRunWorkflow } from '../src/runs/contract';

const REGULAR_PERSIST: ActivityOptions = {
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m', nonRetryableErrorTypes: [PERSIST_REJECTED] },
};

// The write is a few milliseconds of Postgres: a local activity first (workflows/local-first.ts),
// bounded to 10 s, then a regular activity retried until Postgres takes it: an acked event must
// reach the log, however long Postgres refuses. A batch Postgres will never take (a data or
// constraint error) is final at once.
const persist = localFirst<RunActivities>(
  {
    startToCloseTimeout: '30s',
    scheduleToCloseTimeout: '10s',
    // Retries more than a second apart wait on a timer, not inside the workflow task, so the run
    // still answers queries (the API asks how much is unpersisted) while Postgres refuses writes.
    localRetryThreshold: '1s',
    retry: { initialInterval: '250ms', backoffCoefficient: 2, maximumInterval: '10s', nonRetryableErrorTypes: [PERSIST_REJECTED] },
  },
  REGULAR_PERSIST,
  (error) => isRejected(error),
);

/**
 * A closed status reaches the row only through a regular activity, which the history records
 * before it runs. A local activity runs inside the workflow task: when the server then refuses
 * that task (an event arrived meanwhile, UnhandledCommand), the Update that closed the run is not
 * in the history, yet the row would already say closed, and the API, which trusts a closed row,
 * would turn the runtime's retry of that report away: the run would stay open for good.
 */
const persistClose = byName<RunActivities>(REGULAR_PERSIST);

/** Workflow patch id: a closing sync is a regular activity (runs before it wrote it locally). */
const RUN_CLOSE_IN_HISTORY_PATCH = 'run-close-in-history';

/** Workflow patch id: the lease timer follows a lease a heartbeat moved (runs before it woke at the old end, then slept again). */
const LEASE_TIMER_FOLLOWS_PATCH = 'lease-timer-follows';

type PersistInput = Parameters<RunActivities['persistRunState']>[0];

// Each report's lag from its receipt at the front door to its application here, for the worker
// to publish (admission by measured delay). A sink adds nothing to the history and is not called on replay.
const { engineDelay } = proxySinks<EngineDelaySinks>();

function reportLag(receivedAt: number | undefined): void {
  if (typeof receivedAt === 'number') engineDelay.lag(Date.now() - receivedAt);
}

/** `rejected`: Postgres will never take this batch (a data or constraint error); it is skipped. */
async function persistRunState(input: PersistInput, closing: boolean): Promise<'persisted' | 'rejected'> {
  try {
    if (closing && patched(RUN_CLOSE_IN_HISTORY_PATCH)) await persistClose('persistRunState', input);
    else await persist('persistRunState', input);
    return 'persisted';
  } catch (error) {
    return settle(error);
  }
}

const isRejected = (error: unknown) =>
  error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.type === PERSIST_REJECTED;

/** A validator's refusal: its type is the error code the API answers; its one detail carries the rest. */
function refuseUpdate(verdict: { ok: true } | { ok: false; error: string; status?: string }): void {
  if (verdict.ok) return;
  throw ApplicationFailure.create({ type: verdict.error, message: verdict.error, nonRetryable: true, details: [verdict] });
}

/** A caller who may not reach the run is refused as the API refuses a run it cannot see: not found. */
function refuseStranger(run: Run, caller: RunCaller | undefined): void {
  if (!callerMayReach(run.state, caller)) refuseUpdate({ ok: false, error: RUN_NOT_FOUND });
}

function settle(error: unknown): 'rejected' {
  if (isRejected(error)) return 'rejected';
  throw error;
}

/**
 * The workflow's own end for the run's final (already persisted) summary: a failed, timed-out or
 * skipped run ends the workflow Failed, carrying the summary, so operators see the outcome in the
 * Web UI. Runs that ended before RUN_OUTCOME_PATCH completed; their histories replay that way.
 */
function finish(summary: RunSummary): RunSummary {
  const failure = runOutcomeFailure(summary);
  if (failure !== undefined && patched(RUN_OUTCOME_PATCH)) throw failure;
  return summary;
}

/** What the run's handlers, its liveness loop and its sync loop share, for one execution. */
interface Run {
  readonly settings: RunSettings;
  state: RunState;
  /** `state.transitions` as of the last sync (-1: none yet); a claim is answered once it is synced. */
  syncedTransitions: number;
  /** `status/attempt` last written to the search attributes. */
  upserted: string;
  /** The status the transitions metric last counted. */
  reportedStatus: string | undefined;
  /** Set once the liveness loop is done: the sync loop then stops, or leaves a small remainder to carry. */
  finishing: boolean;
  /** A failure of the sync loop, kept for the main body to rethrow (see startSyncLoop). */
  syncFailure: unknown;
  // Exported by the worker's SDK runtime (WORKER_METRICS_PORT); the SDK skips them on replay.
  readonly transitionsCounter: MetricCounter;
  readonly rejectedCounter: MetricCounter;
  /** How progress goes to the parent, when the input asks for a throttle (RUN_PROGRESS_THROTTLE_PATCH). */
  readonly progressOut: ProgressOut | undefined;
  /** Whether this execution tells its parent its end (tellsEnd); undefined until first asked. */
  tellsEnd?: boolean;
}

/** Progress on its way to the parent: at most one signal per interval, always the newest. */
interface ProgressOut {
  intervalMs: number;
  maxChars: number;
  pending: RunProgress | null;
  lastAt: number;
  flushing: boolean;
}

export async function automationRun(input: RunWorkflowInput): Promise<RunSummary> {
  const run = startRun(input);
  // Handlers first, so the signal that came with signalWithStart is applied before anything else.
  setRunHandlers(run);
  const syncLoop = startSyncLoop(run);
  try {
    await liveUntilDone(run);
    await syncLoop;
    if (run.syncFailure !== undefined) throw run.syncFailure;
    // No signal or Update may be lost across continue-as-new or completion.
    await condition(allHandlersFinished);
    if (!isClosed(run.state)) {
      return continueAsNew<typeof automationRun>({ ...input, carried: compactState(run.state) });
    }
    // Closed runs ignore further reports, so this drains: the result is final only once persisted.
    while (needsSync(run)) await persistNextBatch(run);
    await tellParentEnd(run);
    return finish(summaryOf(run.state));
  } catch (error) {
    if (!isCancellation(error)) throw error;
    // Cancelled: the run closes `cancelled` and its final state is persisted in a scope the
    // cancel cannot reach, so the row and the summary say so.
    return CancellationScope.nonCancellable(() => closeCancelled(run, syncLoop));
  }
}

function startRun(input: RunWorkflowInput): Run {
  const { settings } = input;
  // Runs started before claims existed (queued runs claimed by their first report) keep that rule.
  const claims = input.carried !== undefined || input.initialStatus === 'running' ? true : patched(RUN_CLAIMS_PATCH);
  const state = initialState(input, { now: Date.now(), settings }, claims);
  return {
    settings,
    state,
    syncedTransitions: -1,
    upserted: '',
    reportedStatus: input.carried ? state.status : undefined,
    finishing: false,
    syncFailure: undefined,
    progressOut: input.progress ? { ...input.progress, pending: null, lastAt: 0, flushing: false } : undefined,
    transitionsCounter: metricMeter.createCounter('den_run_status_transitions_total', 'transitions', 'Run status transitions.'),
    rejectedCounter: metricMeter.createCounter('den_run_events_rejected_total', 'events', 'Run events Postgres rejected permanently.'),
  };
}

/** Every report goes through decideEvent: the Update's validator and handler, and the legacy signal. */
function setRunHandlers(run: Run): void {
  const { settings } = run;
  // An event as a signal (sent before the Update existed) has no ack to refuse: it takes the next state whatever the verdict.
  setHandler(runEventSignal, (event) => {
    run.state = decideEvent(run.state, event, { now: Date.now(), settings }).next;
  });
  // The validator is the decision the API waits for: a refusal never reaches the history, and
  // an accepted event is applied or has room in the buffer, so a 200 never precedes a drop.
  setHandler(
    reportRunEventUpdate,
    (event) => {
      reportLag(event.receivedAt);
      return takeEvent(run, (state) => decideEvent(state, event, { now: Date.now(), settings }).next, event.sequence);
    },
    {
      validator: (event: RunEventReport, caller?: RunCaller) => {
        refuseStranger(run, caller);
        refuseUpdate(decideEvent(run.state, event, { now: Date.now(), settings }).verdict);
      },
    },
  );
  setCompleteHandler(run);
  setHandler(runHeartbeatSignal, (heartbeat: RunHeartbeat, caller?: RunCaller) => {
    reportLag(heartbeat.receivedAt);
    // A worker from before the check applied every heartbeat, so a stranger's is ignored only
    // where the history records the change (patched() is asked only when it would decide).
    const stranger = caller !== undefined && !callerMayReach(run.state, caller) && patched(RUN_CALLER_PATCH);
    run.state = applyHeartbeat(run.state, { heartbeat, caller: stranger ? caller : undefined }, { now: Date.now(), settings });
  });
  setHandler(runSummaryQuery, () => ({ ...summaryOf(run.state), unpersisted: unpersistedOf(run.state) }));
  // Of two concurrent claims exactly one passes the validator; the other is refused before it
  // reaches the history. The winner is answered once the row shows the claim, so a report sent
  // right after it finds the run claimed (the API reads the row on the report path).
  setHandler(
    claimRunUpdate,
    async (_request) => {
      run.state = applyClaim(run.state, Date.now(), settings);
      tellParentClaim(run);
      const claimed = run.state.transitions;
      await condition(() => run.syncedTransitions >= claimed);
      return { run: summaryOf(run.state), attempt: run.state.attempt, leaseExpiresAt: run.state.leaseExpiresAt ?? Date.now() };
    },
    {
      validator: (_request: RunClaimRequest, caller?: RunCaller) => {
        refuseStranger(run, caller);
        const verdict = claimVerdict(run.state);
        if (!verdict.ok) refuseUpdate(verdict);
      },
    },
  );
  setCancelHandler(run);
}

/** An accepted event's next state, the progress it tells a parent, and its ack: applied, or buffered for its gap. */
function takeEvent(run: Run, next: (state: RunState) => RunState, sequence: number): RunEventAck {
  const applied = run.state.outbox.length;
  run.state = next(run.state);
  tellParent(run, run.state.outbox.slice(applied));
  return { disposition: run.state.nextSequence > sequence ? 'applied' : 'buffered', status: run.state.status };
}

/**
 * A runtime's completion: the terminal event with the attempt's next sequence (src/runs/completion.ts),
 * decided and taken like any event. It needed no patch: no history recorded before it holds the
 * Update, and a worker of an older release refuses it (no handler), which the API answers 503.
 */
function setCompleteHandler(run: Run): void {
  const { settings } = run;
  setHandler(
    completeRunUpdate,
    (completion) => {
      reportLag(completion.receivedAt);
      const sequence = completionEvent(run.state, completion).sequence;
      return takeEvent(run, (state) => decideCompletion(state, completion, { now: Date.now(), settings }).next, sequence);
    },
    {
      validator: (completion: RunCompletion, caller: RunCaller) => {
        refuseStranger(run, caller);
        refuseUpdate(decideCompletion(run.state, completion, { now: Date.now(), settings }).verdict);
      },
    },
  );
}

/**
 * A member's or admin's request to stop the run. It is answered once the row shows it, so a
 * heartbeat that reads the row after the answer tells the runtime (the API's heartbeat reply).
 */
function setCancelHandler(run: Run): void {
  setHandler(
    requestRunCancelUpdate,
    async (request, caller) => {
      run.state = applyCancelRequest(run.state, { request, caller }, Date.now());
      const asked = run.state.transitions;
      await condition(() => run.syncedTransitions >= asked);
      return { status: run.state.status, cancelRequested: run.state.cancelRequested !== undefined };
    },
    {
      validator: (_request: RunCancelRequest, caller: RunCaller) => {
        refuseStranger(run, caller);
        refuseUpdate(cancelVerdict(run.state));
      },
    },
  );
}

/**
 * A run started as a child (a Slack invocation) tells its parent the newest answer text or the
 * tool it uses, among the events just applied, so the parent keeps its message current without
 * polling. Runs from before RUN_PROGRESS_PATCH told nobody (patched() is asked only when it would decide).
 */
const RUN_PROGRESS_PATCH = 'run-progress';

function tellParent(run: Run, applied: RunEventReport[]): void {
  const parent = workflowInfo().parent;
  const last = applied.findLast((e) => e.type === 'assistant' || e.type === 'capability_execution');
  if (parent === undefined || last === undefined || !patched(RUN_PROGRESS_PATCH)) return;
  const text = last.type === 'assistant' && typeof last.payload.text === 'string' ? last.payload.text : undefined;
  const tool = last.type === 'capability_execution' ? toolName(last.payload) : undefined;
  if (text === undefined && tool === undefined) return;
  const progress: RunProgress = {
    runId: run.state.runId,
    sequence: run.state.eventCount,
    ...(text !== undefined ? { text } : { tool }),
    ...(tellsEnd(run) ? { tellsEnd: true } : {}),
  };
  if (run.progressOut && patched(RUN_PROGRESS_THROTTLE_PATCH)) return queueProgress(run.progressOut, progress, parent);
  signalParent(parent, progress);
}

/**
 * Workflow patch id: a child run tells its parent at most one progress per interval (the
 * newest, its text cut to what Slack can show), on a timer, so a long streaming run does not
 * fill the parent's history; runs before it signalled every batch of events.
 */
const RUN_PROGRESS_THROTTLE_PATCH = 'run-progress-throttle';

function signalParent(parent: { workflowId: string; runId: string }, progress: RunProgress): void {
  // A parent that already closed cannot take it, and needs nothing more: the failure is dropped.
  // A run that tells its end signals the parent's current execution, wherever it continued as new.
  getExternalWorkflowHandle(parent.workflowId, progress.tellsEnd ? undefined : parent.runId)
    .signal(runProgressSignal, progress)
    .catch(() => undefined);
}

/**
 * Whether this execution of a child run tells its parent its end (RUN_TELLS_END_PATCH), decided
 * once, where it is first needed: its first progress, or its end.
 */
function tellsEnd(run: Run): boolean {
  run.tellsEnd ??= workflowInfo().parent !== undefined && patched(RUN_TELLS_END_PATCH);
  return run.tellsEnd;
}

/**
 * A claim to the parent's current execution (RUN_TELLS_CLAIM_PATCH), so a parent that told its
 * member no runtime was there shows progress instead; a parent already gone needs nothing.
 */
function tellParentClaim(run: Run): void {
  const parent = workflowInfo().parent;
  if (parent === undefined || !patched(RUN_TELLS_CLAIM_PATCH)) return;
  getExternalWorkflowHandle(parent.workflowId)
    .signal(runClaimedSignal, { runId: run.state.runId, attempt: run.state.attempt })
    .catch(() => undefined);
}

/** The run's summary to its parent's current execution, once the row holds it; a parent already gone needs nothing. */
async function tellParentEnd(run: Run): Promise<void> {
  const parent = workflowInfo().parent;
  if (parent === undefined || !tellsEnd(run)) return;
  await getExternalWorkflowHandle(parent.workflowId)
    .signal(runEndedSignal, summaryOf(run.state))
    .catch(() => undefined);
}

/** Keeps the newest progress and sends it once the interval since the last signal has passed. */
function queueProgress(out: ProgressOut, progress: RunProgress, parent: { workflowId: string; runId: string }): void {
  out.pending = progress.text === undefined ? progress : { ...progress, text: progress.text.slice(0, out.maxChars) };
  if (out.flushing) return;
  out.flushing = true;
  // Detached: its failure (a cancel rejecting the timer) must not fail the workflow task.
  flushProgress(out, parent)
    .catch(() => undefined)
    .finally(() => (out.flushing = false));
}

async function flushProgress(out: ProgressOut, parent: { workflowId: string; runId: string }): Promise<void> {
  while (out.pending !== null) {
    const wait = out.lastAt + out.intervalMs - Date.now();
    if (wait > 0) await sleep(wait);
    const next = out.pending;
    out.pending = null;
    out.lastAt = Date.now();
    signalParent(parent, next);
  }
}

/** The tool a capability_execution event names, under the keys runtimes use. */
function toolName(payload: Record<string, unknown>): string {
  for (const key of ['tool', 'name', 'capability']) {
    if (typeof payload[key] === 'string' && payload[key]) return payload[key] as string;
  }
  return 'a tool';
}

const needsSync = (run: Run) => run.state.outbox.length > 0 || run.state.transitions !== run.syncedTransitions;

const continueAsNewDue = (run: Run) =>
  workflowInfo().continueAsNewSuggested || run.state.signalsThisExecution >= run.settings.continueAsNewEvents;

/**
 * The liveness loop: applies each deadline as it passes until the run closes or continue-as-new
 * is due, then tells the sync loop to finish (in the same step, before it can look again).
 */
async function liveUntilDone(run: Run): Promise<void> {
  const { settings } = run;
  while (!isClosed(run.state) && !continueAsNewDue(run)) {
    run.state = tick(run.state, Date.now(), settings);
    if (isClosed(run.state)) break;
    const deadline = nextDeadline(run.state, settings);
    const seen = run.state.transitions;
    if (deadline === null) {
      await condition(() => run.state.transitions !== seen || continueAsNewDue(run));
      continue;
    }
    const follows = patched(LEASE_TIMER_FOLLOWS_PATCH);
    const changed = () =>
      run.state.transitions !== seen || continueAsNewDue(run) || (follows && deadlineMovedOn(run.state, deadline, settings));
    const woke = await condition(changed, Math.max(1, deadline - Date.now()));
    // Timer fired: that deadline has passed (unless a heartbeat moved it, which tick sees).
    if (!woke) run.state = tick(run.state, Math.max(Date.now(), deadline), settings);
  }
  run.finishing = true;
}

/**
 * The sync loop, started beside the liveness loop. Its failure is kept in `run.syncFailure` for
 * the main body to rethrow: a detached promise that rejects unhandled would fail every workflow
 * task. A cancel request rejects its wait or activity; the cancel path persists the final state itself.
 */
function startSyncLoop(run: Run): Promise<void> {
  return syncUntilFinished(run).catch((error: unknown) => {
    if (!isCancellation(error)) run.syncFailure = error;
  });
}

async function syncUntilFinished(run: Run): Promise<void> {
  for (;;) {
    await condition(() => needsSync(run) || run.finishing);
    if (!needsSync(run)) return;
    // Continuing as new under a steady stream of events: the outbox never empties (every
    // activity round trip lets more reports in), so a small remainder travels in the carried
    // state instead, to be persisted first by the next execution.
    // A pending transition (a claim waits for it) is always synced first.
    if (run.finishing && !isClosed(run.state) && canCarry(run.state) && run.state.transitions === run.syncedTransitions) return;
    await persistNextBatch(run);
  }
}

/** One sync: the search attributes at a new status or attempt, then the row and the next batch of events. */
async function persistNextBatch(run: Run): Promise<void> {
  const events = outboxBatch(run.state);
  const transitions = run.state.transitions;
  run.state = { ...run.state, syncVersion: run.state.syncVersion + 1 };
  upsertStatus(run);
  const { state } = run;
  // The row does not need the last assistant text (it can be large and would be written on
  // every sync); the workflow result and the query carry it.
  const summary = { ...summaryOf(state), lastAssistantText: undefined, leaseTimeoutMs: run.settings.leaseTimeoutMs };
  const persisted = await persistRunState(
    {
      organizationId: state.organizationId,
      runId: state.runId,
      version: state.syncVersion,
      summary,
      events,
    },
    isClosed(state),
  );
  if (persisted === 'rejected') {
    // Set apart, loudly: the worker logged the SQLSTATE; the metric counts the events.
    run.rejectedCounter.add(events.length);
    log.error('run batch rejected by Postgres', { runId: run.state.runId, events: events.length });
  }
  // The outbox only grows at its end meanwhile, so its first `events.length` are these.
  run.state = commitOutbox(run.state, events.length);
  run.syncedTransitions = transitions;
}

/** The search attributes, the transitions metric and a log line, once per status or attempt. */
function upsertStatus(run: Run): void {
  const { state } = run;
  const marker = `${state.status}/${state.attempt}`;
  if (marker === run.upserted) return;
  upsertSearchAttributes([
    { key: runSearchAttributes.OrgId, value: state.organizationId },
    { key: runSearchAttributes.RunStatus, value: state.status },
    { key: runSearchAttributes.RunAttempt, value: state.attempt },
  ]);
  run.upserted = marker;
  if (state.status !== run.reportedStatus) {
    run.transitionsCounter.add(1, { from: run.reportedStatus ?? 'none', to: state.status, cause: state.error ?? 'reported' });
    run.reportedStatus = state.status;
  }
  log.info('run status', { runId: state.runId, status: state.status, attempt: state.attempt, error: forLog(state.error) });
}

/** After a cancel, out of its reach: close the run `cancelled` and persist everything left. */
async function closeCancelled(run: Run, syncLoop: Promise<void>): Promise<RunSummary> {
  run.state = applyCancel(run.state, Date.now());
  run.finishing = true;
  await syncLoop;
  while (needsSync(run)) await persistNextBatch(run);
  await tellParentEnd(run);
  // A cancel that came after the run had ended (failed, say) leaves that outcome as it was.
  return finish(summaryOf(run.state));
}

implementsWorkflow(automationRunWorkflow, automationRun);
