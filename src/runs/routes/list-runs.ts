/** GET /v1/automation-runs: runs newest first, from the `automation_runs` table. */
import { isAdmin, type Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, authResponses } from '../../app/http/schemas';
import type { z } from '../../app/http/zod';
import type { RunDeps } from '../deps';
import { RunListBody, RunListQuery } from '../schemas';
import { listRuns } from '../store';
import { RUN_TAGS, summaryBody } from './shared';

/** Members see their own runs; owners and admins the organization's. */
async function listVisibleRuns(deps: Pick<RunDeps, 'db'>, principal: Principal, query: z.output<typeof RunListQuery>): Promise<Reply> {
  const { db } = deps;
  const runs = await listRuns(db, {
    organizationId: principal.organizationId,
    ...query,
    ...(isAdmin(principal.role) ? {} : { memberId: principal.memberId }),
  });
  return { status: 200, body: { runs: runs.map(summaryBody) } };
}

export function createListRunsRoute(deps: Pick<RunDeps, 'db'>): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/automation-runs',
    summary: "Automation runs, newest first: a member's own, or the organization's for owners and admins",
    description:
      'Read from the `automation_runs` table, which each run workflow keeps current at every status ' +
      'transition (not from Temporal visibility, which is eventually consistent). `?status=queued` lists ' +
      'runs waiting for a claim (POST /v1/automation-runs/claim).',
    tags: RUN_TAGS,
    auth: 'authenticated',
    query: RunListQuery,
    responses: {
      200: { description: 'The runs.', schema: RunListBody },
      400: { description: 'Invalid query.', schema: InvalidRequestError },
      401: authResponses[401],
    },
    handler: ({ query, principal }) => listVisibleRuns(deps, principal, query),
  });
}
