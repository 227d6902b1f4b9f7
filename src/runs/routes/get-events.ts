/** GET /v1/automation-runs/{id}/events: a run's persisted events, in order. */
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, authResponses } from '../../app/http/schemas';
import type { z } from '../../app/http/zod';
import { runWorkflowId } from '../contract';
import type { RunDeps } from '../deps';
import { RunEventsBody, RunEventsQuery, RunIdParams } from '../schemas';
import { findRun, hasRunEvents, listRunEvents } from '../store';
import { canSee, type RunAsk } from '../access';
import { RUN_TAGS, notFound } from './shared';

type RunEventsDeps = Pick<RunDeps, 'db' | 'ingress'>;

/** A run the table does not show yet may still exist: its workflow writes the row a moment after it starts. */
async function runExists(deps: RunEventsDeps, organizationId: string, runId: string): Promise<boolean> {
  const { db, ingress } = deps;
  if (await findRun(db, organizationId, runId)) return true;
  if (await hasRunEvents(db, organizationId, runId)) return true;
  return (await ingress.describe({ id: runWorkflowId(organizationId, runId) })) !== undefined;
}

async function getEvents(deps: RunEventsDeps, { principal, runId }: RunAsk, query: z.output<typeof RunEventsQuery>): Promise<Reply> {
  const { db } = deps;
  const row = await findRun(db, principal.organizationId, runId);
  if (row && !canSee(principal, row.memberId)) throw notFound();
  const events = await listRunEvents(db, { organizationId: principal.organizationId, runId, ...query });
  if (events.length === 0 && !(await runExists(deps, principal.organizationId, runId))) throw notFound();
  return { status: 200, body: { events } };
}

export function createGetEventsRoute(deps: RunEventsDeps): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/automation-runs/{id}/events',
    summary: "An automation run's persisted events, in order",
    description: 'Ordered by attempt, then sequence. Page with `attempt` and `after` (the last sequence seen).',
    tags: RUN_TAGS,
    auth: 'authenticated',
    params: RunIdParams,
    query: RunEventsQuery,
    responses: {
      200: { description: 'The events.', schema: RunEventsBody },
      400: { description: 'Invalid id or query.', schema: InvalidRequestError },
      401: authResponses[401],
      404: { description: 'No such run in your organization.' },
    },
    handler: ({ params, query, principal }) => getEvents(deps, { principal, runId: params.id }, query),
  });
}
