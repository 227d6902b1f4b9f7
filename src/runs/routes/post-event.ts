/** POST /v1/automation-runs/{id}/events: one event of a run, delivered to the run's workflow. */
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import type { z } from '../../app/http/zod';
import type { RunAsk } from '../access';
import type { RunDeps } from '../deps';
import { deliverReport, isSameCompletion, type ReportGates, type RunReport } from '../report';
import { EVENT_BODY_LIMIT_BYTES, RunEventBody, RunIdParams } from '../schemas';
import { RUN_TAGS, reportResponses, runClosed } from './shared';

/** An event as posted: who posts it, for which run, and its body. */
interface EventPost extends RunAsk {
  body: z.output<typeof RunEventBody>;
}

/** Delivers the event; a repeat of the completion that closed the run is acknowledged as a duplicate. */
async function postEvent(deps: RunDeps, gates: ReportGates, { principal, runId, body }: EventPost): Promise<Reply> {
  const { now } = deps;
  const event = { ...body, receivedAt: now() };
  const runReport: RunReport = { kind: 'event', event };
  const outcome = await deliverReport(deps, { principal, runId, report: runReport }, gates);
  if (outcome.result === 'closed') {
    if (!isSameCompletion(runReport, outcome.status)) throw runClosed(outcome.status);
    return { status: 200, body: { ok: true }, outcome: { outcome: 'duplicate', reason: 'same_completion' } };
  }
  return { status: 200, body: { ok: true }, outcome: { outcome: outcome.result, reason: event.type } };
}

export function createPostEventRoute(deps: RunDeps, gates: ReportGates): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/automation-runs/{id}/events',
    summary: 'Report one event of an automation run',
    description:
      'Starts the run on its first report. Events of the current attempt are applied in `sequence` order ' +
      '(out-of-order ones wait for the gap; duplicates and older attempts are ignored). A `terminal` event ' +
      '(`payload.status` succeeded|failed|cancelled, default succeeded) ends the run once every earlier sequence ' +
      'is applied. After that, reports get 409, except a repeat of the same completion, which is idempotent. ' +
      'A first report that would start a run beyond the live-run capacity (`RUN_CAPACITY`) gets 429 `capacity` with `Retry-After`.',
    tags: RUN_TAGS,
    auth: 'authenticated',
    ingress: true,
    params: RunIdParams,
    body: { kind: 'json', schema: RunEventBody, limitBytes: EVENT_BODY_LIMIT_BYTES },
    responses: reportResponses,
    handler: ({ params, body, principal }) => postEvent(deps, gates, { principal, runId: params.id, body }),
  });
}
