/**
 * One actor workflow per automation run (spec 4.3, 4.4; issue #4). The front door signals it;
 * it owns ordering, dedupe, state and liveness. The rules live in ./automation-run-state.ts as
 * pure functions; this file only wires them to signals, a moving deadline and persistence.
 *
 * Two loops run side by side, so a slow Postgres never delays a lease deadline:
 * - the liveness loop sleeps until the next deadline with `condition(fn, remainingMs)`, waking
 *   early only when the status or attempt changes. Heartbeats move the lease without waking it:
 *   the deadline only ever moves later, so the loop re-reads it when its timer fires (the
 *   "updatable timer" of temporalio/samples-typescript, with no polling);
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
  log,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
  metricMeter,
  patched,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { localFirst } from './local-first';
import { forLog } from '../src/runs/log-text';
import {
  PERSIST_REJECTED,
  RUN_CLAIMS_PATCH,
  RUN_OUTCOME_PATCH,
  claimRunUpdate,
  reportRunEventUpdate,
  runEventSignal,
  runHeartbeatSignal,
  runOutcomeFailure,
  runSearchAttributes,
  runSummaryQuery,
  type RunSummary,
  type RunWorkflowInput,
} from '../src/runs/contract';
import {
  applyEvent,
  applyHeartbeat,
  cancelRun,
  canCarry,
  claimRun,
  claimVerdict,
  commitOutbox,
  compactState,
  eventVerdict,
  initialState,
  isClosed,
  nextDeadline,
  outboxBatch,
  summarize,
  tick,
  unpersistedOf,
  type RunState,
} from '../src/runs/state';

// The write is a few milliseconds of Postgres: a local activity first (workflows/local-first.ts),
// bounded to 10 s, then a regular activity retried until Postgres takes it: an acked event must
// reach the log, however long Postgres refuses. A batch Postgres will never take (a data or
// constraint error) is final at once.
const persist = localFirst(
  {
    startToCloseTimeout: '30s',
    scheduleToCloseTimeout: '10s',
    // Retries more than a second apart wait on a timer, not inside the workflow task, so the run
    // still answers queries (the API asks how much is unpersisted) while Postgres refuses writes.
    localRetryThreshold: '1s',
    retry: { initialInterval: '250ms', backoffCoefficient: 2, maximumInterval: '10s', nonRetryableErrorTypes: [PERSIST_REJECTED] },
  },
  {
    startToCloseTimeout: '30s',
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m', nonRetryableErrorTypes: [PERSIST_REJECTED] },
  },
  (error) => isRejected(error),
);

type PersistInput = Parameters<Activities['persistRunState']>[0];

/** `rejected`: Postgres will never take this batch (a data or constraint error); it is skipped. */
async function persistRunState(input: PersistInput): Promise<'persisted' | 'rejected'> {
  try {
    await persist('persistRunState', input);
    return 'persisted';
  } catch (error) {
    return settle(error);
  }
}

const isRejected = (error: unknown) =>
  error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.type === PERSIST_REJECTED;

/** A validator's refusal: its type is the error code the API answers; its one detail carries the rest. */
function refuse(verdict: { ok: true } | { ok: false; error: string; status?: string }): void {
  if (verdict.ok) return;
  throw ApplicationFailure.create({ type: verdict.error, message: verdict.error, nonRetryable: true, details: [verdict] });
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

export async function automationRun(input: RunWorkflowInput): Promise<RunSummary> {
  const { settings } = input;
  // Runs started before claims existed (queued runs claimed by their first report) keep that rule.
  const claims = input.carried !== undefined || input.initialStatus === 'running' ? true : patched(RUN_CLAIMS_PATCH);
  let state: RunState = initialState(input, Date.now(), settings, claims);

  // Handlers first, so the signal that came with signalWithStart is applied before anything else.
  setHandler(runEventSignal, (event) => {
    state = applyEvent(state, event, Date.now(), settings);
  });
  // The validator is the decision the API waits for: a refusal never reaches the history, and
  // an accepted event is applied or has room in the buffer, so a 200 never precedes a drop.
  setHandler(
    reportRunEventUpdate,
    (event) => {
      state = applyEvent(state, event, Date.now(), settings);
      return { disposition: state.nextSequence > event.sequence ? 'applied' : 'buffered', status: state.status };
    },
    { validator: (event) => refuse(eventVerdict(state, event, settings)) },
  );
  setHandler(runHeartbeatSignal, (heartbeat) => {
    state = applyHeartbeat(state, heartbeat, Date.now(), settings);
  });
  setHandler(runSummaryQuery, () => ({ ...summarize(state), unpersisted: unpersistedOf(state) }));
  let syncedTransitions = -1;
  // Of two concurrent claims exactly one passes the validator; the other is refused before it
  // reaches the history. The winner is answered once the row shows the claim, so a report sent
  // right after it finds the run claimed (the API reads the row on the report path).
  setHandler(
    claimRunUpdate,
    async (_request) => {
      state = claimRun(state, Date.now(), settings);
      const claimed = state.transitions;
      await condition(() => syncedTransitions >= claimed);
      return { run: summarize(state), attempt: state.attempt, leaseExpiresAt: state.leaseExpiresAt ?? Date.now() };
    },
    {
      validator: (_request) => {
        const verdict = claimVerdict(state);
        if (!verdict.ok) refuse(verdict);
      },
    },
  );

  let upserted = '';
  let reportedStatus: string | undefined = input.carried ? state.status : undefined;
  // Exported by the worker's SDK runtime (WORKER_METRICS_PORT); the SDK skips it on replay.
  const transitionsCounter = metricMeter.createCounter('den_run_status_transitions_total', 'transitions', 'Run status transitions.');
  const rejectedCounter = metricMeter.createCounter('den_run_events_rejected_total', 'events', 'Run events Postgres rejected permanently.');
  const needsSync = () => state.outbox.length > 0 || state.transitions !== syncedTransitions;

  const syncOnce = async () => {
    const events = outboxBatch(state);
    const transitions = state.transitions;
    state = { ...state, syncVersion: state.syncVersion + 1 };
    const marker = `${state.status}/${state.attempt}`;
    if (marker !== upserted) {
      upsertSearchAttributes([
        { key: runSearchAttributes.OrgId, value: state.organizationId },
        { key: runSearchAttributes.RunStatus, value: state.status },
        { key: runSearchAttributes.RunAttempt, value: state.attempt },
      ]);
      upserted = marker;
      if (state.status !== reportedStatus) {
        transitionsCounter.add(1, { from: reportedStatus ?? 'none', to: state.status, cause: state.error ?? 'reported' });
        reportedStatus = state.status;
      }
      log.info('run status', { runId: state.runId, status: state.status, attempt: state.attempt, error: forLog(state.error) });
    }
    // The row does not need the last assistant text (it can be large and would be written on
    // every sync); the workflow result and the query carry it.
    const summary = { ...summarize(state), lastAssistantText: undefined, leaseTimeoutMs: settings.leaseTimeoutMs };
    const persisted = await persistRunState({
      organizationId: state.organizationId,
      runId: state.runId,
      version: state.syncVersion,
      summary,
      events,
    });
    if (persisted === 'rejected') {
      // Set apart, loudly: the worker logged the SQLSTATE; the metric counts the events.
      rejectedCounter.add(events.length);
      log.error('run batch rejected by Postgres', { runId: state.runId, events: events.length });
    }
    // The outbox only grows at its end meanwhile, so its first `events.length` are these.
    state = commitOutbox(state, events.length);
    syncedTransitions = transitions;
  };

  let finishing = false;
  // A failure of the loop is kept for the main body to rethrow: a detached promise that rejects
  // unhandled would fail every workflow task. A cancel request rejects its wait or activity; the
  // cancel path below then persists the final state itself.
  let syncFailure: unknown;
  const syncLoop = (async () => {
    for (;;) {
      await condition(() => needsSync() || finishing);
      if (!needsSync()) return;
      // Continuing as new under a steady stream of events: the outbox never empties (every
      // activity round trip lets more signals in), so a small remainder travels in the carried
      // state instead, to be persisted first by the next execution.
      // A pending transition (a claim waits for it) is always synced first.
      if (finishing && !isClosed(state) && canCarry(state) && state.transitions === syncedTransitions) return;
      await syncOnce();
    }
  })().catch((error: unknown) => {
    if (!isCancellation(error)) syncFailure = error;
  });

  const continueAsNewDue = () => workflowInfo().continueAsNewSuggested || state.signalsThisExecution >= settings.continueAsNewEvents;

  try {
    while (!isClosed(state) && !continueAsNewDue()) {
      state = tick(state, Date.now(), settings);
      if (isClosed(state)) break;
      const deadline = nextDeadline(state, settings);
      const seen = state.transitions;
      const changed = () => state.transitions !== seen || continueAsNewDue();
      if (deadline === null) {
        await condition(changed);
        continue;
      }
      const woke = await condition(changed, Math.max(1, deadline - Date.now()));
      // Timer fired: that deadline has passed (unless a heartbeat moved it, which tick sees).
      if (!woke) state = tick(state, Math.max(Date.now(), deadline), settings);
    }

    finishing = true;
    await syncLoop;
    if (syncFailure !== undefined) throw syncFailure;
    // No signal may be lost across continue-as-new or completion (engineering notes).
    await condition(allHandlersFinished);
    if (!isClosed(state)) {
      return continueAsNew<typeof automationRun>({ ...input, carried: compactState(state) });
    }
    // Closed runs ignore further reports, so this drains: the result is final only once persisted.
    while (needsSync()) await syncOnce();
    return finish(summarize(state));
  } catch (error) {
    if (!isCancellation(error)) throw error;
    // Cancelled (issue #17): the run closes `cancelled` and its final state is persisted in a
    // scope the cancel cannot reach, so the row and the summary say so.
    return CancellationScope.nonCancellable(async () => {
      state = cancelRun(state, Date.now());
      finishing = true;
      await syncLoop;
      while (needsSync()) await syncOnce();
      // A cancel that came after the run had ended (failed, say) leaves that outcome as it was.
      return finish(summarize(state));
    });
  }
}
