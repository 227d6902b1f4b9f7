/**
 * Delivering a report to the run's actor workflow: an event as an Update (update-with-start), whose
 * validator decides before the ack; a heartbeat as a signal (signal-with-start).
 *
 * - The workflow id is derived from the caller's organization and the run id
 *   (`runWorkflowId`), so two organizations can use the same run id without meeting.
 * - The first report starts the run; later ones reach the running one (conflict policy USE_EXISTING).
 * - A closed run is never started again: REJECT_DUPLICATE makes Temporal refuse while it still
 *   remembers the run (namespace retention), and the `automation_runs` row, which the workflow
 *   writes before it completes, keeps refusing after that. Either way: 409 run_closed.
 * - Temporal unreachable or too slow → 503 (the ingress gateway), never an ack.
 * - A report that would make a run live (start it, or start a newer attempt) needs room under
 *   RUN_CAPACITY (src/runs/capacity.ts); one that keeps a live run alive never waits for it.
 * - A heartbeat that extends a lease is forwarded with a bound that lands it before that lease
 *   runs out. One that comes when the run's lease looks spent (on a busy engine the lease starts
 *   when the workflow task that started the attempt began, which can be long before its runtime
 *   hears of it) is still forwarded, within LATE_FORWARD_MS, and answered by what the run then
 *   says: the run applies every heartbeat in its history before its lease timer's tick. Slower
 *   than that, or unconfirmed, the answer is 503, never a 200 the lease does not keep.
 * - Runs start with a higher priority than the other workflows (RUN_PRIORITY_KEY): their tasks
 *   are dispatched first when the task queue has a backlog.
 */
import { AppError, errors } from '../app/errors';
import type { Principal } from '../app/http/auth';
import type { ApplicationFailure } from '@temporalio/client';
import {
  automationRunWorkflow,
  EVENT_REFUSALS,
  RUN_PRIORITY_KEY,
  RUN_NOT_FOUND,
  isClosedRunStatus,
  reportRunEventUpdate,
  runHeartbeatSignal,
  runSummaryQuery,
  runWorkflowId,
  type RunEventReport,
  type RunHeartbeat,
  type RunSummary,
  type RunWorkflowInput,
} from './contract';
import { canSee, runCaller, type RunAsk } from './access';
import type { BacklogGate } from './backlog';
import type { RunCapacity } from './capacity';
import type { RunDeps } from './deps';
import { outlivedMs, reconcileRun } from './reconcile';
import { findRun, type RunKey, type RunRow } from './store';
import type { EventRefusal } from './state';

export type RunReport = { kind: 'event'; event: RunEventReport } | { kind: 'heartbeat'; heartbeat: RunHeartbeat };

export type ReportOutcome =
  /**
   * `leaseTimeoutMs`: the run's own lease (its row's), or the current setting for a run this report
   * starts. `cancelRequested`: the run's row (or, without one, its query) showed a cancel request.
   * `duplicate`: the run already holds this event (applied or buffered).
   */
  | {
      result: 'enqueued' | 'not_enqueued' | 'duplicate';
      leaseTimeoutMs: number;
      cancelRequested?: boolean;
      /** Heartbeats: the run's current attempt, and whether the heartbeat's attempt holds its lease (heartbeatLease). */
      lease?: HeartbeatLease;
    }
  | { result: 'closed'; status: string };

/** What a report passes on its way: the run's backlog (events) and the live-run capacity (new runs and attempts). */
export interface ReportGates {
  backlog: BacklogGate;
  capacity: RunCapacity;
}

/** What the heartbeat's process knows of the lease: the least lease end its own forwards set (HeartbeatCoalescer). */
export interface HeartbeatKnowledge {
  leaseFloor?: number;
}

/** A report on its way to its run: who sends it, to which run, and what the sender's process knows of the lease. */
export interface ReportDelivery extends RunAsk {
  report: RunReport;
  knowledge?: HeartbeatKnowledge;
}

export async function deliverReport(deps: RunDeps, delivery: ReportDelivery, gates: ReportGates): Promise<ReportOutcome> {
  const { principal, runId, report } = delivery;
  const { settings, ingress } = deps;
  const run = { organizationId: principal.organizationId, runId };
  // An event of an organization whose share is known spent is refused before any Postgres read.
  if (report.kind === 'event') ingress.shedIfSpent({ tenant: principal.organizationId, admission: 'shed' });
  const row = await readRow(deps, run, report);
  // Another member's run does not exist for this caller (never 403: that would say it does).
  if (row && !canSee(principal, row.memberId)) throw errors.notFound('No such automation run.');
  // Without a row (a new run, or Postgres cannot answer) a heartbeat asks the run who owns it.
  const unseen = !row && report.kind === 'heartbeat' ? await refuseUnseenRun(deps, principal, runId) : undefined;
  if (row && isClosedRunStatus(row.status)) return { result: 'closed', status: row.status };
  // An open row older than its run could live: its workflow ended outside its own logic, and
  // Temporal may have forgotten it, so a signal would start a fresh run the row ignores.
  if (row && deps.now() - row.summary.createdAt > outlivedMs(settings.defaults)) {
    const status = await reconcileRun(deps, principal.organizationId, runId);
    if (status !== undefined && isClosedRunStatus(status)) return { result: 'closed', status };
  }
  if (row?.summary.claimRequired) refuseUnclaimedAttempt(row, reportAttempt(report));
  // Events carry data the run must keep until Postgres takes it; heartbeats carry none.
  if (report.kind === 'event') await gates.backlog.admit(principal.organizationId, runId, row);
  const known = row?.summary ?? unseen;
  const starts = startsAttempt(known, reportAttempt(report));
  if (starts) {
    // A heartbeat without a row already asked the run; an event asks only at the limit.
    const exists = report.kind === 'event' && !row ? () => runIsLive(deps, principal, runId) : undefined;
    await gates.capacity.admit(run, 'report', exists);
  }
  try {
    const outcome = await sendReport(deps, delivery, known);
    if (starts && outcome.result === 'closed') gates.capacity.release(run);
    return outcome;
  } catch (error) {
    // Not started after all (refused, or Temporal did not take it): its place is given back.
    if (starts) gates.capacity.release(run);
    throw error;
  }
}

/** The report to the run's workflow: a heartbeat as a signal, an event as an Update, each with its start. */
async function sendReport(deps: RunDeps, delivery: ReportDelivery, known: RunSummary | undefined): Promise<ReportOutcome> {
  const { principal, runId, report } = delivery;
  const { settings, ingress } = deps;
  const input: RunWorkflowInput = {
    organizationId: principal.organizationId,
    runId,
    initialStatus: 'running',
    createdAt: deps.now(),
    // Fixed at start and carried in the input: a deployment change never reshapes a live run.
    settings: { ...settings.defaults },
    memberId: principal.memberId,
  };
  const workflowId = runWorkflowId(principal.organizationId, runId);
  const leaseTimeoutMs = known?.leaseTimeoutMs ?? settings.defaults.leaseTimeoutMs;
  const start = { workflow: automationRunWorkflow, id: workflowId, args: [input] as [RunWorkflowInput], priorityKey: RUN_PRIORITY_KEY };
  if (report.kind === 'heartbeat') {
    // Heartbeats stay signals: they carry no data, so one that races the close loses nothing,
    // and a signal to a run whose row showed the caller may reach it needs no worker to answer.
    // A run that holds a lease must never lose a heartbeat to admission: it could cost the lease.
    const forward = { known, attempt: report.heartbeat.attempt, leaseFloor: delivery.knowledge?.leaseFloor };
    const budget = await heartbeatBudget(deps, { principal, runId }, forward);
    const outcome = await ingress.signalWithStart({
      ...start,
      signal: runHeartbeatSignal,
      signalArgs: [report.heartbeat, runCaller(principal)],
      tenancy: { tenant: principal.organizationId, admission: known?.status === 'running' ? 'bypass' : 'shed' },
      ...(budget.maxTimeoutMs === undefined ? {} : { maxTimeoutMs: budget.maxTimeoutMs }),
    });
    // A late forward is answered by the run as it is now, with this heartbeat in its history.
    const confirmed = budget.late && outcome !== 'closed' ? await confirmLateHeartbeat(deps, principal, runId) : undefined;
    // The run's own answer, when it was asked, is fresher than the row: a lease it lost is said so.
    const seen = confirmed ?? budget.live ?? known;
    const cancelRequested = Boolean(seen?.cancelRequested);
    const lease = heartbeatLease(seen, report.heartbeat.attempt);
    if (outcome !== 'closed') return { result: outcome, leaseTimeoutMs, cancelRequested, lease };
    return { result: 'closed', status: await closedStatus(deps, principal.organizationId, runId) };
  }
  // The run's validator refuses a caller who may not reach it, whether or not its row exists yet.
  const outcome = await ingress.updateWithStart({
    ...start,
    update: reportRunEventUpdate,
    updateArgs: [report.event, runCaller(principal)],
    tenancy: { tenant: principal.organizationId, admission: 'shed' },
  });
  switch (outcome.outcome) {
    case 'enqueued':
    case 'not_enqueued':
      return { result: outcome.outcome, leaseTimeoutMs };
    case 'closed':
      return { result: 'closed', status: await closedStatus(deps, principal.organizationId, runId) };
    case 'refused':
      return refusedEvent(outcome.refusal, leaseTimeoutMs);
  }
}

/**
 * Whether a report of `attempt` would make the run live: a run nobody started, or a newer
 * attempt after a lost lease on a run without claims. A running run is live already; a queued
 * or claim-required run starts attempts only through a claim.
 */
export function startsAttempt(known: Pick<RunSummary, 'status' | 'attempt' | 'claimRequired'> | undefined, attempt: number): boolean {
  if (!known) return true;
  return known.status === 'awaiting_retry' && attempt > known.attempt && !known.claimRequired;
}

/** Whether Temporal knows the run and it holds a lease (asked only at the capacity limit, for a run with no row yet). */
async function runIsLive(deps: RunDeps, principal: Principal, runId: string): Promise<boolean> {
  const summary = await deps.ingress.query({ id: runWorkflowId(principal.organizationId, runId), query: runSummaryQuery, args: [] });
  return summary?.status === 'running';
}

/**
 * The margin kept between a forward's deadline and the lease it extends, since the API's and the
 * engine's clocks differ a little: a second, or a twentieth of a shorter lease.
 */
export function leaseMarginMs(leaseTimeoutMs: number): number {
  return Math.min(1_000, Math.floor(leaseTimeoutMs / 20));
}
/** Less time than this left, a forward could not reach Temporal and be answered anyway. */
const MIN_FORWARD_MS = 100;
/**
 * How long a forward may take once the run's lease looks spent: the run still takes it if it lands
 * before the lease timer's task, which comes no sooner than the lease end and, on a busy engine,
 * later. A second is most of that on the engines this runs on, and the answer is confirmed anyway.
 */
const LATE_FORWARD_MS = 1_000;

/** What a heartbeat's forward knows of the lease it extends: the run as last seen, the heartbeat's attempt, and the least end this process's forwards set. */
interface ForwardLease {
  known: RunSummary | undefined;
  attempt: number;
  leaseFloor: number | undefined;
}

/**
 * How long a heartbeat's forward may take (undefined: the gateway's own bound) so that it lands
 * in the run's history before the lease it extends runs out: what this process knows of that
 * lease (the row, the query of a run without one, its own forwards), else the run's own answer
 * (`live`, then also what the reply says). Too little left for that: a late forward
 * (LATE_FORWARD_MS), whose answer the run confirms (confirmLateHeartbeat).
 */
async function heartbeatBudget(
  deps: RunDeps,
  { principal, runId }: RunAsk,
  { known, attempt, leaseFloor }: ForwardLease,
): Promise<{ maxTimeoutMs?: number; live?: RunSummary; late?: true }> {
  // Only the running attempt's lease can be lost; any other heartbeat starts or changes nothing it could lose.
  if (known?.status !== 'running' || attempt !== known.attempt) return {};
  const margin = leaseMarginMs(known.leaseTimeoutMs ?? deps.settings.defaults.leaseTimeoutMs);
  const budget = (end: number | null | undefined) => (end ?? 0) - margin - deps.now();
  const soFar = budget(Math.max(known.leaseExpiresAt ?? 0, leaseFloor ?? 0));
  if (soFar >= MIN_FORWARD_MS) return { maxTimeoutMs: soFar };
  // What this process knows is older than the lease now is (other processes' heartbeats moved it): ask the run.
  const live = await deps.ingress.query({ id: runWorkflowId(principal.organizationId, runId), query: runSummaryQuery, args: [] });
  if (live?.status !== 'running' || live.attempt !== attempt) return live ? { live } : {};
  const left = budget(live.leaseExpiresAt);
  if (left < MIN_FORWARD_MS) return { maxTimeoutMs: LATE_FORWARD_MS, live, late: true };
  return { maxTimeoutMs: left, live };
}

/**
 * The run's state once a late heartbeat is in its history (a query sees every event recorded
 * before it): still running in the heartbeat's attempt, the heartbeat kept the lease; lost, the
 * reply says so. No answer from the run: 503, since nothing confirms the lease.
 */
async function confirmLateHeartbeat(deps: RunDeps, principal: Principal, runId: string): Promise<RunSummary> {
  const live = await deps.ingress.query({ id: runWorkflowId(principal.organizationId, runId), query: runSummaryQuery, args: [] });
  if (!live) throw errors.unavailable('temporal');
  return live;
}

/** What a heartbeat reply says of the lease: the run's attempt, and whether the heartbeat's attempt holds it. */
export interface HeartbeatLease {
  attempt: number;
  leaseValid: boolean;
}

/**
 * The lease as the run's row (or query) showed it when the heartbeat was forwarded: a run this
 * heartbeat starts, or a newer attempt it starts on a run without claims, holds it; the current
 * attempt holds it while the run is running; an older attempt, or one whose lease was lost
 * (`awaiting_retry`), does not.
 */
export function heartbeatLease(
  known: Pick<RunSummary, 'status' | 'attempt' | 'claimRequired'> | undefined,
  attempt: number,
): HeartbeatLease {
  if (!known) return { attempt, leaseValid: true };
  if (attempt > known.attempt && !known.claimRequired) return { attempt, leaseValid: true };
  return { attempt: known.attempt, leaseValid: attempt === known.attempt && known.status === 'running' };
}

/** The run's validator refused the event (eventVerdict): nothing was recorded; answer why. */
function refusedEvent(refusal: ApplicationFailure, leaseTimeoutMs: number): ReportOutcome {
  const type = refusal.type ?? '';
  if (type === RUN_NOT_FOUND) throw errors.notFound('No such automation run.');
  if (!(EVENT_REFUSALS as readonly string[]).includes(type)) throw refusal;
  const verdict = { ...(refusal.details?.[0] as object), error: type } as EventRefusal;
  if (verdict.error === 'duplicate') return { result: 'duplicate', leaseTimeoutMs };
  if (verdict.error === 'run_closed') return { result: 'closed', status: verdict.status };
  const { ok: _ok, error, ...detail } = verdict;
  throw errors.conflict(error, detail);
}

/**
 * The run's row, for visibility, the closed check and claims. A heartbeat does not need it: when
 * Postgres cannot answer, the heartbeat goes to Temporal once the run's query shows the caller may
 * reach it (REJECT_DUPLICATE still keeps a closed run closed within retention), so a Postgres
 * outage never costs a live run its lease.
 * Events carry data Postgres must take anyway: they get the 503.
 */
async function readRow(deps: RunDeps, { organizationId, runId }: RunKey, report: RunReport): Promise<RunRow | undefined> {
  try {
    return await findRun(deps.db, organizationId, runId);
  } catch (error) {
    if (report.kind === 'heartbeat' && error instanceof AppError && error.dependency === 'postgres') return undefined;
    throw error;
  }
}

/**
 * A heartbeat with no row to check goes only where the caller may go: the run's own query names
 * its owner (a run Temporal does not know is a new one, which this heartbeat starts as the
 * caller's). The run ignores a heartbeat from anyone else too, which covers two first reports
 * racing to start it. The query needs Temporal and a worker: when neither answers, 503.
 */
async function refuseUnseenRun(deps: RunDeps, principal: Principal, runId: string): Promise<RunSummary | undefined> {
  const summary = await deps.ingress.query({ id: runWorkflowId(principal.organizationId, runId), query: runSummaryQuery, args: [] });
  if (!summary) return undefined;
  if (!canSee(principal, summary.memberId)) throw errors.notFound('No such automation run.');
  return summary;
}

const reportAttempt = (report: RunReport) => (report.kind === 'event' ? report.event.attempt : report.heartbeat.attempt);

/**
 * A claim-required run (Slack routing) takes reports only for the attempt its last claim started:
 * before any claim, or for an attempt no claim started yet, 409 not_claimed; for any other attempt,
 * or the claimed one once its lease is lost, 409 stale_attempt. The workflow ignores such reports too; this answers the runtime instead of
 * acking work that would be dropped.
 */
function refuseUnclaimedAttempt(row: RunRow, attempt: number): void {
  const notClaimed = row.status === 'queued' || (row.status === 'awaiting_retry' && attempt > row.attempt);
  if (notClaimed) throw errors.conflict('not_claimed', { status: row.status });
  // Waiting for a retry means the claimed attempt lost its lease: it is stale too.
  if (attempt !== row.attempt || row.status === 'awaiting_retry') throw errors.conflict('stale_attempt', { status: row.status });
}

/** The final status of a run Temporal refused to restart: the row, else what Temporal says (closing the row). */
async function closedStatus(deps: RunDeps, organizationId: string, runId: string): Promise<string> {
  const row = await findRun(deps.db, organizationId, runId);
  if (row && isClosedRunStatus(row.status)) return row.status;
  return (await reconcileRun(deps, organizationId, runId)) ?? 'closed';
}

/**
 * Re-completing a finished run with the same status is idempotent, so a
 * runtime that retries its terminal event after a lost response is not told it failed.
 */
export function isSameCompletion(report: RunReport, status: string): boolean {
  if (report.kind !== 'event' || report.event.type !== 'terminal') return false;
  return (report.event.payload.status ?? 'succeeded') === status;
}
