/**
 * Delivering a report (event or heartbeat) to the run's actor workflow with signalWithStart.
 *
 * - The workflow id is derived from the caller's organization and the run id
 *   (`runWorkflowId`), so two organizations can use the same run id without meeting.
 * - The first report starts the run; later ones signal it (conflict policy USE_EXISTING, the
 *   signalWithStart default).
 * - A closed run is never started again: REJECT_DUPLICATE makes Temporal refuse while it still
 *   remembers the run (namespace retention), and the `automation_runs` row, which the workflow
 *   writes before it completes, keeps refusing after that. Either way: 409 run_closed.
 * - Temporal unreachable or too slow → 503 (temporalCall), never an ack.
 */
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy, WorkflowNotFoundError } from '@temporalio/client';
import type { Services } from '../app/http/services';
import type { Principal } from '../identity/auth';
import { temporalCall } from '../app/temporal/client';
import { isClosedRunStatus, runEventSignal, runHeartbeatSignal, runWorkflowId, runSearchAttributes, type RunEventReport, type RunHeartbeat, type RunWorkflowInput } from './contract';
import { automationRun } from '../../workflows/runs';
import { findRun } from './store';

export type RunReport = { kind: 'event'; event: RunEventReport } | { kind: 'heartbeat'; heartbeat: RunHeartbeat };

export type ReportOutcome = { result: 'accepted' } | { result: 'closed'; status: string };

export async function deliverReport(
  services: Services,
  principal: Principal,
  runId: string,
  report: RunReport,
): Promise<ReportOutcome> {
  const { database, temporal, config, metrics } = services;
  const row = await findRun(database.db, principal.organizationId, runId);
  if (row && isClosedRunStatus(row.status)) return { result: 'closed', status: row.status };
  // Benchmarks only (issue #9): everything but the durable signal, to measure what it costs.
  if (config.bench.disableEnqueue) return { result: 'accepted' };

  const workflowId = runWorkflowId(principal.organizationId, runId);
  const input: RunWorkflowInput = {
    organizationId: principal.organizationId,
    runId,
    initialStatus: 'running',
    createdAt: services.now(),
    // Fixed at start and carried in the input: a deployment change never reshapes a live run.
    settings: { ...config.runs },
    memberId: principal.memberId,
  };
  const options = {
    workflowId,
    taskQueue: temporal.taskQueue,
    args: [input] as [RunWorkflowInput],
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
  };
  try {
    await temporalCall(
      temporal,
      'signalWithStart',
      config.temporal.startTimeoutMs,
      () =>
        report.kind === 'event'
          ? temporal.client.workflow.signalWithStart(automationRun, {
              ...options,
              signal: runEventSignal,
              signalArgs: [report.event],
            })
          : temporal.client.workflow.signalWithStart(automationRun, {
              ...options,
              signal: runHeartbeatSignal,
              signalArgs: [report.heartbeat],
            }),
      metrics,
    );
    return { result: 'accepted' };
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return { result: 'closed', status: await closedStatus(services, principal.organizationId, runId) };
  }
}

/** The final status of a run Temporal refused to restart: the row, else its search attribute. */
async function closedStatus(services: Services, organizationId: string, runId: string): Promise<string> {
  const row = await findRun(services.database.db, organizationId, runId);
  if (row && isClosedRunStatus(row.status)) return row.status;
  try {
    const description = await temporalCall(services.temporal, 'describe', services.config.temporal.startTimeoutMs, () =>
      services.temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId)).describe(),
    );
    const status = description.typedSearchAttributes.get(runSearchAttributes.RunStatus);
    if (status && isClosedRunStatus(status)) return status;
    // Ended outside its own logic (terminated by an operator, or failed).
    return description.status.name.toLowerCase();
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return 'closed';
    throw error;
  }
}

/**
 * Behaviour notes: re-completing a finished run with the same status is idempotent, so a
 * runtime that retries its terminal event after a lost response is not told it failed.
 */
export function isSameCompletion(report: RunReport, status: string): boolean {
  if (report.kind !== 'event' || report.event.type !== 'terminal') return false;
  return (report.event.payload.status ?? 'succeeded') === status;
}
