/** POST /v1/automation-runs/{id}/cancel: asks a run to stop, as its member or an admin. */
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, Unavailable, authResponses } from '../../app/http/schemas';
import { requestCancel } from '../cancel';
import { isClosedRunStatus, type RunCancelAck } from '../contract';
import type { RunDeps } from '../deps';
import { reconcileRun } from '../reconcile';
import { HEARTBEAT_BODY_LIMIT_BYTES, RunCancelAckBody, RunCancelBody, RunConflictBody, RunIdParams } from '../schemas';
import { findRun } from '../store';
import { canSee, runCaller, type RunAsk } from '../access';
import { RUN_TAGS, notFound, runClosed } from './shared';

/** A cancel as the route asks it of the run: who asks, which run, why, and whether the run's row exists. */
interface CancelAsk extends RunAsk {
  reason: string | undefined;
  rowExists: boolean;
}

/**
 * The run's own decision (the Update's validator): a caller who may not reach it is a 404, a run
 * that has ended a 409. A workflow Temporal no longer runs is an ended run when its row exists.
 */
async function askRun(deps: RunDeps, { principal, runId, reason, rowExists }: CancelAsk) {
  const { organizationId } = principal;
  const answer = await requestCancel(deps, { organizationId, runId, caller: runCaller(principal), reason });
  switch (answer.outcome) {
    case 'requested':
      return answer.ack;
    case 'closed':
      throw runClosed(answer.status);
    case 'not_reachable':
      throw notFound();
    case 'not_found':
      if (!rowExists) throw notFound();
      throw runClosed((await reconcileRun(deps, organizationId, runId)) ?? 'closed');
  }
}

async function postCancel(deps: RunDeps, { principal, runId }: RunAsk, reason: string | undefined): Promise<Reply> {
  const row = await findRun(deps.db, principal.organizationId, runId);
  // Another member's run does not exist for this caller (never 403: that would say it does).
  if (row && !canSee(principal, row.memberId)) throw notFound();
  if (row && isClosedRunStatus(row.status)) throw runClosed(row.status);
  // This process's coalesced heartbeats of the run say so at once (requestCancel); other processes
  // learn it within one coalescing window, from the row the Update waited for.
  const ack: RunCancelAck = await askRun(deps, { principal, runId, reason, rowExists: row !== undefined });
  return { status: 202, body: { status: ack.status, cancelRequested: true } };
}

export function createPostCancelRoute(deps: RunDeps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/automation-runs/{id}/cancel',
    summary: 'Ask an automation run to stop',
    description:
      "The run's member, or an owner or admin of the organization. A run no runtime holds (queued, or waiting for a retry) " +
      'closes `cancelled` at once. A claimed run records the request: its runtime learns it from the heartbeat reply ' +
      '(`cancelRequested: true`), and the run ends `cancelled` at its `terminal` event, or when its lease runs out. ' +
      'Reports keep being taken meanwhile. Asking again changes nothing.',
    tags: RUN_TAGS,
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
    handler: ({ params, body, principal }) => postCancel(deps, { principal, runId: params.id }, body?.reason),
  });
}
