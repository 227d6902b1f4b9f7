/**
 * Asking a run to stop: the run's `requestRunCancel` Update, whose validator decides (a caller who
 * may not reach the run, a run already closed). One implementation for the runs API's cancel
 * route and for Slack's Cancel button and `/den cancel`. A cancel taken is noticed at once in this
 * process (runCancelRequested): its heartbeat coalescer says so in the run's next heartbeat reply,
 * even one it answers without asking the run.
 */
import { ApplicationFailure } from '@temporalio/client';
import type { IngressGateway } from '../app/ingress';
import { topic, type Notices } from '../app/notices';
import { RUN_NOT_FOUND, requestRunCancelUpdate, runWorkflowId, type RunCaller, type RunCancelAck } from './contract';

/** A cancel of the run was taken in this process. */
export const runCancelRequested = topic<{ organizationId: string; runId: string }>('run-cancel-requested');

/** The Update is answered once the run's row shows the request, so it gets a claim's bound, not a start's. */
const CANCEL_TIMEOUT_MS = 10_000;

/**
 * `not_reachable`: the run refused a caller who may not reach it; `not_found`: Temporal does not
 * know the workflow (never started, or forgotten after retention).
 */
export type CancelAnswer =
  | { outcome: 'requested'; ack: RunCancelAck }
  | { outcome: 'closed'; status: string }
  | { outcome: 'not_reachable' }
  | { outcome: 'not_found' };

/** The run's status a refusal carries (workflows/runs.ts `refuseUpdate`). */
function refusalStatus(refusal: ApplicationFailure): string {
  const detail = refusal.details?.[0] as { status?: unknown } | undefined;
  return typeof detail?.status === 'string' ? detail.status : 'closed';
}

/**
 * The cancel taken as soon as the run's validator accepts it, without waiting for its handler to
 * record it (the Update is durable in the run's history from then on): for a caller that must
 * answer within a bound, as Slack's 3 s. `updateId` makes a second try the same request.
 */
export async function acceptCancel(
  deps: { ingress: IngressGateway; notices: Notices; now: () => number },
  request: { organizationId: string; runId: string; caller: RunCaller; reason?: string; timeoutMs: number; updateId: string },
): Promise<{ outcome: 'accepted' } | Exclude<CancelAnswer, { outcome: 'requested' }>> {
  const { organizationId, runId } = request;
  const answer = await deps.ingress.startUpdate({
    id: runWorkflowId(organizationId, runId),
    update: requestRunCancelUpdate,
    args: [{ ...(request.reason === undefined ? {} : { reason: request.reason }), requestedAt: deps.now() }, request.caller],
    timeoutMs: request.timeoutMs,
    updateId: request.updateId,
  });
  if (answer.outcome === 'not_found') return answer;
  if (answer.outcome === 'accepted') {
    deps.notices.publish(runCancelRequested, { organizationId, runId });
    return answer;
  }
  if (answer.refusal.type === RUN_NOT_FOUND) return { outcome: 'not_reachable' };
  if (answer.refusal.type === 'run_closed') return { outcome: 'closed', status: refusalStatus(answer.refusal) };
  throw answer.refusal;
}

export async function requestCancel(
  deps: { ingress: IngressGateway; notices: Notices; now: () => number },
  request: { organizationId: string; runId: string; caller: RunCaller; reason?: string; timeoutMs?: number },
): Promise<CancelAnswer> {
  const { organizationId, runId } = request;
  const answer = await deps.ingress.executeUpdate({
    id: runWorkflowId(organizationId, runId),
    update: requestRunCancelUpdate,
    args: [{ ...(request.reason === undefined ? {} : { reason: request.reason }), requestedAt: deps.now() }, request.caller],
    timeoutMs: request.timeoutMs ?? CANCEL_TIMEOUT_MS,
  });
  if (answer.outcome === 'not_found') return answer;
  if (answer.outcome === 'done') {
    deps.notices.publish(runCancelRequested, { organizationId, runId });
    return { outcome: 'requested', ack: answer.result };
  }
  if (answer.refusal.type === RUN_NOT_FOUND) return { outcome: 'not_reachable' };
  if (answer.refusal.type === 'run_closed') return { outcome: 'closed', status: refusalStatus(answer.refusal) };
  throw answer.refusal;
}
