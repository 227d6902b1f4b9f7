/**
 * `POST /v1/automation-runs/{id}/complete`: a runtime ends its attempt without numbering a terminal
 * event itself. The run's `completeRun` Update decides, on its own state, exactly as it would a
 * terminal event with the attempt's next sequence (src/runs/completion.ts): ordered after every
 * event it holds, refused for a stale attempt, repeated harmlessly. The Update reaches a run that
 * exists; it never starts one.
 */
import type { ApplicationFailure } from '@temporalio/client';
import { errors } from '../app/errors';
import { EVENT_REFUSALS, RUN_NOT_FOUND, completeRunUpdate, isClosedRunStatus, runWorkflowId, type RunCompletion } from './contract';
import { canSee, runCaller, type RunAsk } from './access';
import type { BacklogGate } from './backlog';
import type { RunDeps } from './deps';
import { reconcileRun } from './reconcile';
import { notFound, runClosed } from './routes/shared';
import { findRun } from './store';

/** The completion's answer: 200 `{ok, status}`, or a coded 404/409. */
export type CompleteOutcome = { ok: true; status: string; duplicate: boolean };

/** A repeat of the completion that closed the run is answered 200; any other final status is run_closed. */
function closedAnswer(completion: RunCompletion, status: string): CompleteOutcome {
  if (completion.status !== status) throw runClosed(status);
  return { ok: true, status, duplicate: true };
}

/** A runtime's completion of a run it was asked about. */
export interface CompletionAsk extends RunAsk {
  completion: RunCompletion;
}

export async function completeRun(deps: RunDeps, backlog: BacklogGate, request: CompletionAsk): Promise<CompleteOutcome> {
  const { principal, runId, completion } = request;
  const { organizationId } = principal;
  const row = await findRun(deps.db, organizationId, runId);
  // Another member's run does not exist for this caller (never 403: that would say it does).
  if (row && !canSee(principal, row.memberId)) throw notFound();
  if (row && isClosedRunStatus(row.status)) return closedAnswer(completion, row.status);
  // A completion carries data (its error, its result) the run must keep until Postgres takes it.
  await backlog.admit(organizationId, runId, row);
  const answer = await deps.ingress.executeUpdate({
    id: runWorkflowId(organizationId, runId),
    update: completeRunUpdate,
    args: [completion, runCaller(principal)],
  });
  switch (answer.outcome) {
    case 'done':
      return { ok: true, status: answer.result.status, duplicate: false };
    case 'not_found': {
      // Temporal no longer runs it: an ended run when its row exists, else no run at all.
      if (!row) throw notFound();
      return closedAnswer(completion, (await reconcileRun(deps, organizationId, runId)) ?? 'closed');
    }
    case 'refused':
      return refusedCompletion(answer.refusal, completion);
  }
}

/** The run's validator refused the completion: nothing was recorded; answer why. */
function refusedCompletion(refusal: ApplicationFailure, completion: RunCompletion): CompleteOutcome {
  const type = refusal.type ?? '';
  if (type === RUN_NOT_FOUND) throw notFound();
  if (!(EVENT_REFUSALS as readonly string[]).includes(type)) throw refusal;
  const { ok: _ok, error: _error, ...detail } = (refusal.details?.[0] ?? {}) as Record<string, unknown>;
  if (type === 'duplicate') return { ok: true, status: 'running', duplicate: true };
  if (type === 'run_closed') return closedAnswer(completion, String(detail.status ?? 'closed'));
  throw errors.conflict(type, detail);
}
