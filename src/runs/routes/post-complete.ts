/** POST /v1/automation-runs/{id}/complete: ends a runtime's attempt, as a terminal event with the next sequence would. */
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import type { z } from '../../app/http/zod';
import type { RunAsk } from '../access';
import type { BacklogGate } from '../backlog';
import { completeRun } from '../complete';
import type { RunDeps } from '../deps';
import { EVENT_BODY_LIMIT_BYTES, RunCompleteBody, RunCompleteReply, RunIdParams } from '../schemas';
import { RUN_TAGS, reportResponses } from './shared';

/** A completion as posted: who posts it, for which run, and its body. */
interface CompletionPost extends RunAsk {
  body: z.output<typeof RunCompleteBody>;
}

async function postComplete(deps: RunDeps, backlog: BacklogGate, { principal, runId, body }: CompletionPost): Promise<Reply> {
  const outcome = await completeRun(deps, backlog, { principal, runId, completion: { ...body, receivedAt: deps.now() } });
  return {
    status: 200,
    body: { ok: true, status: outcome.status },
    outcome: outcome.duplicate ? { outcome: 'duplicate', reason: 'same_completion' } : { outcome: 'enqueued', reason: 'complete' },
  };
}

export function createPostCompleteRoute(deps: RunDeps, backlog: BacklogGate): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/automation-runs/{id}/complete',
    summary: 'Complete an automation run: end the attempt, after every event already sent',
    description:
      'An addition to the interface spec. The run takes it exactly as a `terminal` event whose `sequence` follows every event ' +
      'the run holds of the attempt, out-of-order ones waiting in its buffer included: it closes the run once they are all ' +
      "applied (until then `status` is `running`). `result` is kept in that event's payload. The same completion repeated " +
      'answers 200; a different final status 409 `run_closed`; an older attempt, or one whose lease was lost, 409 `stale_attempt`. ' +
      'It never starts a run: an unknown run is a 404.',
    tags: RUN_TAGS,
    auth: 'authenticated',
    ingress: true,
    params: RunIdParams,
    body: { kind: 'json', schema: RunCompleteBody, limitBytes: EVENT_BODY_LIMIT_BYTES },
    responses: {
      ...reportResponses,
      200: { description: 'The run took the completion (or already had it).', schema: RunCompleteReply },
      404: { description: "No such run, or another member's." },
      503: {
        description:
          'Temporal, its worker or Postgres could not take it in time, or a worker of an older release (mid-deploy) has no handler for it: nothing was recorded; retry.',
        schema: reportResponses[503].schema,
      },
    },
    handler: ({ params, body, principal }) => postComplete(deps, backlog, { principal, runId: params.id, body }),
  });
}
