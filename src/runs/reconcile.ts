/**
 * Runs whose workflow ended outside its own logic: an operator terminated it, the
 * server timed it out, or the history limit ended it. Its code never ran to close the row, so the
 * row would say `running` forever, and once Temporal's retention forgets the run, a report with
 * its id would start a fresh workflow whose writes the row's version guard ignores. Reconciling
 * closes the row with what happened, and a closed row refuses the id (409 run_closed) for good.
 *
 * Three callers: a report Temporal refuses as already closed, a read of an open row, and the
 * worker's periodic sweep of rows that outlived anything their run could do.
 */
import type { IngressGateway } from '../app/ingress';
import type { Db } from '../app/store/db';
import { RUN_FAILURE_TYPES, isClosedRunStatus, runSearchAttributes, runWorkflowId, type RunSettings, type RunStatus } from './contract';
import type { RunsSettings } from './settings';
import { closeRowOutsideLogic } from './store';

export interface StaleRunSweepDeps {
  settings: RunsSettings;
  db: Db;
  ingress: IngressGateway;
}

/** What a workflow status that its own code did not produce means for the run. */
const OUTSIDE_LOGIC: Record<string, { status: RunStatus; error: string }> = {
  TERMINATED: { status: 'failed', error: 'workflow_terminated' },
  TIMED_OUT: { status: 'timed_out', error: 'workflow_timed_out' },
  FAILED: { status: 'failed', error: 'workflow_failed' },
  CANCELLED: { status: 'cancelled', error: 'workflow_cancelled' },
};

/**
 * Whether a closed workflow ended through the run's own logic: completed, or failed with the
 * outcome failure, both after publishing a closed RunStatus. Any other end (terminated, timed
 * out, failed before its run closed) happened outside it.
 */
export function endedByOwnLogic(workflowStatus: string, runStatus: string | undefined): boolean {
  if (runStatus === undefined || !isClosedRunStatus(runStatus)) return false;
  if (workflowStatus === 'COMPLETED') return true;
  return workflowStatus === 'FAILED' && RUN_FAILURE_TYPES[runStatus as RunStatus] !== undefined;
}

/**
 * The run's status as Temporal knows it, closing the row when the workflow ended outside its
 * own logic. Undefined while the workflow is running (nothing to reconcile).
 */
export async function reconcileRun(deps: StaleRunSweepDeps, organizationId: string, runId: string): Promise<RunStatus | undefined> {
  const description = await deps.ingress.describe({ id: runWorkflowId(organizationId, runId) });
  if (!description) {
    // Forgotten by Temporal (retention) while the row is open: nothing will ever close it.
    await closeRowOutsideLogic(deps.db, { organizationId, runId }, { status: 'failed', error: 'workflow_not_found' });
    return 'failed';
  }
  const name = description.status.name;
  if (name === 'RUNNING' || name === 'CONTINUED_AS_NEW') return undefined;
  // Ended by its own code: the row is (or is about to be) written by the workflow itself. A run
  // whose outcome is a failure ends Failed on purpose (RUN_OUTCOME_PATCH), after the row.
  const own = description.typedSearchAttributes.get(runSearchAttributes.RunStatus);
  if (endedByOwnLogic(name, own)) return own as RunStatus;
  const outcome = OUTSIDE_LOGIC[name] ?? { status: 'failed' as const, error: `workflow_${name.toLowerCase()}` };
  await closeRowOutsideLogic(deps.db, { organizationId, runId }, outcome);
  return outcome.status;
}

/** How long a run can live by its own deadlines, plus an hour: an open row older than this is stale. */
export function outlivedMs(runs: RunSettings): number {
  return runs.claimDeadlineMs + runs.maxDurationMs + runs.retryWindowMs * runs.maxAttempts + 3_600_000;
}

/**
 * The worker's sweep: open rows older than anything their run's own deadlines allow (claim
 * deadline + max duration + every retry window, plus an hour), reconciled one by one.
 */
export async function sweepStaleRuns(deps: StaleRunSweepDeps, now: Date, limit = 100): Promise<number> {
  const stale = await deps.db
    .selectFrom('automation_runs')
    .select(['organization_id', 'run_id'])
    .where('status', 'in', ['queued', 'running', 'awaiting_retry'])
    .where('created_at', '<', new Date(now.getTime() - outlivedMs(deps.settings.defaults)))
    .orderBy('created_at')
    .limit(limit)
    .execute();
  let closed = 0;
  for (const row of stale) if ((await reconcileRun(deps, row.organization_id, row.run_id)) !== undefined) closed += 1;
  return closed;
}
