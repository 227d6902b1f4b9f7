/** POST /v1/automation-runs/{id}/claim: starts a queued run's next attempt, for one claimant only. */
import { errors } from '../../app/errors';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { claimRun } from '../claim';
import { isClosedRunStatus } from '../contract';
import type { RunCapacity } from '../capacity';
import type { RunDeps } from '../deps';
import { HEARTBEAT_BODY_LIMIT_BYTES, RunClaimRequestBody, RunConflictBody, RunIdParams } from '../schemas';
import { findRun } from '../store';
import { canSee, type RunAsk } from '../access';
import { RUN_TAGS, claimBody, claimResponses, notFound, runClosed } from './shared';

async function postClaim(deps: RunDeps, capacity: RunCapacity, ask: RunAsk): Promise<Reply> {
  const { principal, runId } = ask;
  const { db } = deps;
  const row = await findRun(db, principal.organizationId, runId);
  if (!row || !canSee(principal, row.memberId)) throw notFound();
  if (isClosedRunStatus(row.status)) throw runClosed(row.status);
  const outcome = await claimRun(deps, capacity, ask);
  if (!outcome.ok) throw errors.conflict(outcome.error, { status: outcome.status });
  return { status: 200, body: claimBody(outcome.claim) };
}

export function createPostClaimRoute(deps: RunDeps, capacity: RunCapacity): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/automation-runs/{id}/claim',
    summary: 'Claim a queued automation run: start its next attempt, exclusively',
    description:
      "Decided by the run's workflow (a Temporal Update with a validator): of concurrent claims exactly one wins. " +
      'The claim starts the returned attempt with a fresh lease, as a first heartbeat would. Beyond the live-run capacity ' +
      '(`RUN_CAPACITY`) the claim gets 429 `capacity` with `Retry-After`, and the run stays queued.',
    tags: RUN_TAGS,
    auth: 'authenticated',
    params: RunIdParams,
    body: { kind: 'json', schema: RunClaimRequestBody, limitBytes: HEARTBEAT_BODY_LIMIT_BYTES },
    responses: {
      ...claimResponses,
      404: { description: "No such run, or another member's." },
      409: { description: '`already_claimed` (another claim holds its lease) or `run_closed` (it has ended).', schema: RunConflictBody },
    },
    handler: ({ params, principal }) => postClaim(deps, capacity, { principal, runId: params.id }),
  });
}
