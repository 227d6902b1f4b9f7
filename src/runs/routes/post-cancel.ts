/** POST /v1/automation-runs/{id}/cancel: asks a run to stop, as its member or an admin. */
import { ApplicationFailure, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { errors } from '../../app/errors';
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, Unavailable, authResponses } from '../../app/http/schemas';
import { temporalCall } from '../../app/temporal/client';
import { RUN_NOT_FOUND, isClosedRunStatus, requestRunCancelUpdate, runWorkflowId, type RunCancelAck } from '../contract';
import type { RunDeps } from '../deps';
import type { HeartbeatCoalescer } from '../heartbeat-coalescer';
import { reconcileRun } from '../reconcile';
import { HEARTBEAT_BODY_LIMIT_BYTES, RunCancelAckBody, RunCancelBody, RunConflictBody, RunIdParams } from '../schemas';
import { findRun } from '../store';
import { canSee, runCaller } from '../visibility';
import { TAGS, notFound, runClosed } from './shared';

/** The Update is answered once the run's row shows the request, so it gets a claim's bound, not a start's. */
const CANCEL_TIMEOUT_MS = 10_000;

/** The run's status a refusal carries (workflows/runs.ts `refuse`). */
function refusalStatus(refusal: ApplicationFailure): string {
  const detail = refusal.details?.[0] as { status?: unknown } | undefined;
  return typeof detail?.status === 'string' ? detail.status : 'closed';
}

/**
 * Whether the workflow's code has no handler for the Update: the SDK refuses it with this message.
 * During a rolling deploy a worker of a release before run cancels answers so; after the deploy
 * the same run answers, so the caller gets a 503 to retry rather than a 500.
 */
function isUnknownUpdate(refusal: unknown): boolean {
  return refusal instanceof ApplicationFailure && refusal.message.startsWith('No registered handler for update');
}

/**
 * The run's own decision (the Update's validator): a caller who may not reach it is a 404, a run
 * that has ended a 409. A workflow Temporal no longer runs is an ended run when its row exists.
 */
async function askRun(deps: RunDeps, principal: Principal, runId: string, reason: string | undefined, rowExists: boolean) {
  const { temporal, metrics, now } = deps;
  const { organizationId } = principal;
  try {
    return await temporalCall(
      temporal,
      'requestRunCancel',
      CANCEL_TIMEOUT_MS,
      () =>
        temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId)).executeUpdate(requestRunCancelUpdate, {
          args: [{ ...(reason === undefined ? {} : { reason }), requestedAt: now() }, runCaller(principal)],
        }),
      metrics,
    );
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) {
      if (!rowExists) throw notFound();
      throw runClosed((await reconcileRun(deps, organizationId, runId)) ?? 'closed');
    }
    const refusal = error instanceof WorkflowUpdateFailedError ? error.cause : undefined;
    if (refusal instanceof ApplicationFailure && refusal.type === RUN_NOT_FOUND) throw notFound();
    if (refusal instanceof ApplicationFailure && refusal.type === 'run_closed') throw runClosed(refusalStatus(refusal));
    if (isUnknownUpdate(refusal)) throw errors.unavailable('temporal', refusal);
    throw error;
  }
}

async function postCancel(
  deps: RunDeps,
  coalescer: HeartbeatCoalescer,
  principal: Principal,
  runId: string,
  reason: string | undefined,
): Promise<Reply> {
  const row = await findRun(deps.db, principal.organizationId, runId);
  // Another member's run does not exist for this caller (never 403: that would say it does).
  if (row && !canSee(principal, row.memberId)) throw notFound();
  if (row && isClosedRunStatus(row.status)) throw runClosed(row.status);
  const ack: RunCancelAck = await askRun(deps, principal, runId, reason, row !== undefined);
  // This process's coalesced heartbeats of the run say so at once; other processes learn it
  // within one coalescing window, from the row the Update waited for.
  coalescer.noteCancelRequested(principal.organizationId, runId);
  return { status: 202, body: { status: ack.status, cancelRequested: true } };
}

export function createPostCancelRoute(deps: RunDeps, coalescer: HeartbeatCoalescer): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/automation-runs/{id}/cancel',
    summary: 'Ask an automation run to stop',
    description:
      "The run's member, or an owner or admin of the organization. A run no runtime holds (queued, or waiting for a retry) " +
      'closes `cancelled` at once. A claimed run records the request: its runtime learns it from the heartbeat reply ' +
      '(`cancelRequested: true`), and the run ends `cancelled` at its `terminal` event, or when its lease runs out. ' +
      'Reports keep being taken meanwhile. Asking again changes nothing.',
    tags: TAGS,
    auth: 'authenticated',
    params: RunIdParams,
    body: { kind: 'json', schema: RunCancelBody, limitBytes: HEARTBEAT_BODY_LIMIT_BYTES },
    responses: {
      202: { description: 'The run took the request.', schema: RunCancelAckBody },
      400: { description: 'Invalid id or body.', schema: InvalidRequestError },
      401: authResponses[401],
      404: { description: "No such run in your organization, or another member's." },
      409: { description: '`run_closed`: the run has ended (`status`); nothing changed.', schema: RunConflictBody },
      503: {
        description:
          'Temporal, its worker or Postgres could not take the request in time, or a worker of an older release (mid-deploy) has no cancel handler; retry.',
        schema: Unavailable,
      },
    },
    handler: ({ params, body, principal }) => postCancel(deps, coalescer, principal, params.id, body?.reason),
  });
}
