/** POST /v1/automation-runs/claim: claims the oldest queued run the caller sees, waiting for one if asked. */
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { claimNext, type ClaimPoll } from '../claim';
import type { RunCapacity } from '../capacity';
import type { RunDeps } from '../deps';
import { HEARTBEAT_BODY_LIMIT_BYTES, RunClaimNextBody } from '../schemas';
import { RUN_TAGS, claimBody, claimResponses } from './shared';

async function postClaimNext(deps: RunDeps, capacity: RunCapacity, poll: ClaimPoll): Promise<Reply> {
  const claim = await claimNext(deps, capacity, poll);
  return claim ? { status: 200, body: claimBody(claim) } : { status: 204 };
}

export function createPostClaimNextRoute(deps: RunDeps, capacity: RunCapacity): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/automation-runs/claim',
    summary: 'Claim the oldest queued automation run visible to the caller, waiting for one if asked',
    description:
      'Long-poll with `waitSeconds` (0 to 30): answers as soon as a run is claimable, or 204 when the wait ends ' +
      'with nothing. Two runtimes polling at once never get the same run. A run found beyond the live-run capacity ' +
      '(`RUN_CAPACITY`) is not claimed: 429 `capacity` with `Retry-After`, and the run stays queued.',
    tags: RUN_TAGS,
    auth: 'authenticated',
    body: { kind: 'json', schema: RunClaimNextBody, limitBytes: HEARTBEAT_BODY_LIMIT_BYTES },
    responses: { ...claimResponses, 204: { description: 'Nothing to claim within the wait.' } },
    handler: ({ body, principal }) => postClaimNext(deps, capacity, { principal, waitMs: (body?.waitSeconds ?? 0) * 1000 }),
  });
}
