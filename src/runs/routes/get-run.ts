/** GET /v1/automation-runs/{id}: a run's summary, live from its workflow or stored once it ended. */
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, Unavailable, authResponses } from '../../app/http/schemas';
import { temporalCall } from '../../app/temporal/client';
import { isClosedRunStatus, runSummaryQuery, runWorkflowId, type RunSummary } from '../contract';
import type { RunDeps } from '../deps';
import { reconcileRun } from '../reconcile';
import { RunIdParams, RunSummaryBody } from '../schemas';
import { findRun } from '../store';
import { canSee } from '../visibility';
import { TAGS, notFound, summaryBody } from './shared';

/** The summary the run's workflow answers to a query (which replays it). */
async function querySummary(
  deps: Pick<RunDeps, 'temporal' | 'platform' | 'metrics'>,
  organizationId: string,
  runId: string,
): Promise<RunSummary> {
  const { temporal, platform, metrics } = deps;
  return temporalCall(
    temporal,
    'query',
    platform.temporalCallTimeoutMs,
    () => temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId)).query(runSummaryQuery),
    metrics,
  );
}

async function getRun(deps: RunDeps, principal: Principal, runId: string): Promise<Reply> {
  const { db } = deps;
  let row = await findRun(db, principal.organizationId, runId);
  if (row && !canSee(principal, row.memberId)) throw notFound();
  // An open row whose workflow ended outside its own logic (terminated…) is closed first:
  // a query would replay the workflow and answer with its last state, `running`.
  if (row && !isClosedRunStatus(row.status) && (await reconcileRun(deps, principal.organizationId, runId)) !== undefined) {
    row = await findRun(db, principal.organizationId, runId);
  }
  if (row && isClosedRunStatus(row.status)) return { status: 200, body: summaryBody(row.summary) };
  try {
    const live = await querySummary(deps, principal.organizationId, runId);
    if (!canSee(principal, live.memberId)) throw notFound();
    return { status: 200, body: summaryBody(live) };
  } catch (error) {
    // The stored summary is current as of the last transition or persisted batch.
    if (row) return { status: 200, body: summaryBody(row.summary) };
    if (error instanceof WorkflowNotFoundError) throw notFound();
    throw error;
  }
}

export function createGetRunRoute(deps: RunDeps): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/automation-runs/{id}',
    summary: "An automation run's summary",
    description:
      "Live runs answer from the run's workflow (a query); ended runs from the `automation_runs` table. " +
      "Another organization's run, or for a member another member's, is a 404.",
    tags: TAGS,
    auth: 'authenticated',
    params: RunIdParams,
    responses: {
      200: { description: 'The summary.', schema: RunSummaryBody },
      400: { description: 'Invalid id.', schema: InvalidRequestError },
      401: authResponses[401],
      404: { description: 'No such run in your organization.' },
      503: { description: 'Temporal unreachable and no stored summary.', schema: Unavailable },
    },
    handler: ({ params, principal }) => getRun(deps, principal, params.id),
  });
}
