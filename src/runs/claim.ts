/**
 * Exclusive claims. The run workflow decides through its `claimRun` Update: of two
 * concurrent claims its validator lets exactly one through, so the answer is the workflow's own
 * decision, never a read-then-write race in the API. Claim-next picks a candidate from the
 * `automation_runs` table (a short hold taken with FOR UPDATE SKIP LOCKED, so concurrent pollers
 * try different runs) and moves on to the next one when the Update refuses.
 */
import type { ApplicationFailure } from '@temporalio/client';
import { errors } from '../app/errors';
import { isAdmin, type Principal } from '../app/http/auth';
import { CLAIM_REFUSALS, RUN_NOT_FOUND, claimRunUpdate, runWorkflowId, type RunClaim } from './contract';
import type { RunCapacity } from './capacity';
import type { RunDeps } from './deps';
import { holdClaimCandidate, releaseClaimHold } from './store';
import { runCaller, type RunAsk } from './access';

/**
 * The Update waits for a worker and for the run's row to show the claim, so it gets longer than
 * a start. A claim that lands after this gave up is held by nobody: its lease runs out and the
 * run can be claimed again.
 */
const CLAIM_TIMEOUT_MS = 10_000;
/** How long a claim-next poller keeps other pollers off the candidate it is trying. */
const CANDIDATE_HOLD_MS = CLAIM_TIMEOUT_MS + 1_000;
/** How often a long-poll looks for newly queued runs. */
const LONG_POLL_INTERVAL_MS = 250;

export type ClaimOutcome = { ok: true; claim: RunClaim } | { ok: false; error: (typeof CLAIM_REFUSALS)[number]; status: string };

/**
 * One claim Update, once the live-run capacity has room for the attempt it starts (429 `capacity`
 * otherwise: a queued run stays queued). Unknown runs, and runs the caller may not reach (the run
 * decides), are a 404; a refusal is the workflow's answer.
 */
export async function claimRun(deps: RunDeps, capacity: RunCapacity, { principal, runId }: RunAsk): Promise<ClaimOutcome> {
  const run = { organizationId: principal.organizationId, runId };
  await capacity.admit(run, 'claim');
  let outcome: ClaimOutcome;
  try {
    outcome = await claimUpdate(deps, principal, runId);
  } catch (error) {
    capacity.release(run);
    throw error;
  }
  if (!outcome.ok) capacity.release(run);
  return outcome;
}

async function claimUpdate(deps: RunDeps, principal: Principal, runId: string): Promise<ClaimOutcome> {
  const answer = await deps.ingress.executeUpdate({
    id: runWorkflowId(principal.organizationId, runId),
    update: claimRunUpdate,
    args: [{}, runCaller(principal)],
    timeoutMs: CLAIM_TIMEOUT_MS,
  });
  if (answer.outcome === 'done') return { ok: true, claim: answer.result };
  if (answer.outcome === 'not_found' || answer.refusal.type === RUN_NOT_FOUND) throw errors.notFound('No such automation run.');
  const refusal = answer.refusal;
  if ((CLAIM_REFUSALS as readonly (string | undefined)[]).includes(refusal.type ?? undefined)) {
    return { ok: false, error: refusal.type as (typeof CLAIM_REFUSALS)[number], status: claimRefusalStatus(refusal) };
  }
  throw refusal;
}

/** The run's status in a validator's refusal (workflows/runs.ts `refuseUpdate`). */
function claimRefusalStatus(refusal: ApplicationFailure): string {
  const detail = refusal.details?.[0] as { status?: unknown } | undefined;
  return typeof detail?.status === 'string' ? detail.status : '';
}

/** A claim-next poll: who asks, and how long (ms) it may wait for a run to be queued. */
export interface ClaimPoll {
  principal: Principal;
  waitMs: number;
}

/**
 * Claims the oldest claimable run visible to the caller, waiting up to `waitMs` for one to be
 * queued. Undefined when the wait ends with nothing.
 */
export async function claimNext(deps: RunDeps, capacity: RunCapacity, { principal, waitMs }: ClaimPoll): Promise<RunClaim | undefined> {
  const deadline = deps.now() + waitMs;
  const memberId = isAdmin(principal.role) ? undefined : principal.memberId;
  for (;;) {
    const runId = await holdClaimCandidate(deps.db, {
      organizationId: principal.organizationId,
      memberId,
      now: new Date(deps.now()),
      holdMs: CANDIDATE_HOLD_MS,
    });
    if (runId !== undefined) {
      const release = () => releaseClaimHold(deps.db, principal.organizationId, runId).catch(() => undefined);
      let outcome: ClaimOutcome;
      try {
        outcome = await claimRun(deps, capacity, { principal, runId });
      } catch (error) {
        await release(); // Undecided (Temporal unavailable): another poller may try it.
        throw error;
      }
      // Claimed: the row already says running (the Update answers after it is written), and the
      // hold must not outlive the claim, or the run could not be claimed again after a lost lease.
      if (outcome.ok) {
        await release();
        return outcome.claim;
      }
      // Lost the race to another claim: keep the hold until the row shows it, try the next one.
    }
    const remaining = deadline - deps.now();
    if (remaining <= 0) return undefined;
    await new Promise((resolve) => setTimeout(resolve, Math.min(LONG_POLL_INTERVAL_MS, remaining)));
  }
}
