/** GET /v1/automation-runs/{id}: a run's summary, live from its workflow or stored once it ended. */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, Unavailable, authResponses } from '../../app/http/schemas';
import { isClosedRunStatus, runSummaryQuery, runWorkflowId, type RunSummary } from '../contract';
import type { RunDeps } from '../deps';
import { reconcileRun } from '../reconcile';
import { RunIdParams, RunSummaryBody } from '../schemas';
import { findRun } from '../store';
import { canSee } from '../access';
import { RUN_TAGS, notFound, summaryBody } from './shared';

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
  // The run's own summary (a query replays its workflow); the stored one, current as of the last
  // transition or persisted batch, when the workflow cannot answer.
  let live: RunSummary | undefined;
  try {
    live = await deps.ingress.query({ id: runWorkflowId(principal.organizationId, runId), query: runSummaryQuery, args: [] });
  } catch (error) {
    if (row) return { status: 200, body: summaryBody(row.summary) };
    throw error;
  }
  if (live && canSee(principal, live.memberId)) return { status: 200, body: summaryBody(live) };
  if (row) return { status: 200, body: summaryBody(row.summary) };
  throw notFound();
}

export function createGetRunRoute(deps: RunDeps): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/automation-runs/{id}',
    summary: "An automation run's summary",
    description:
      "Live runs answer from the run's workflow (a query); ended runs from the `automation_runs` table. " +
      "Another organization's run, or for a member another member's, is a 404.",
    tags: RUN_TAGS,
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
