import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { PERSIST_REJECTED, isClosedRunStatus } from '../src/runs/contract';
import { recordRunnerOutcome } from '../src/runs/breaker-store';
import type { RunsSettings } from '../src/runs/settings';
import { persistRun, type PersistRunInput } from '../src/runs/store';
import type { WorkerDeps } from '../src/app/feature';

/** Postgres foreign_key_violation: the organization was deleted while its run was live. */
const FOREIGN_KEY_VIOLATION = '23503';

/**
 * SQLSTATE classes no retry can change: 22 data exception, 23 integrity constraint violation.
 * Everything else (a read-only failover 25006, a revoked privilege 42501, a full disk 53100,
 * a lost connection) is worth retrying until Postgres takes the write again.
 */
const isPermanent = (code: unknown) => typeof code === 'string' && /^(22|23)/.test(code);

/**
 * A closed run's end, into its member's breaker (src/runs/breaker.ts). Every closing write of the
 * run calls it; the breaker ignores what it already took. A breaker that cannot take it is logged,
 * never a reason to fail the run's write: only an outage is retried, with the write.
 */
async function recordEnd(deps: Pick<WorkerDeps<RunsSettings>, 'db' | 'log' | 'settings'>, input: PersistRunInput): Promise<void> {
  if (!isClosedRunStatus(input.summary.status)) return;
  try {
    const { tripped } = await recordRunnerOutcome(deps.db, input.summary, { now: Date.now(), settings: deps.settings.runners.breaker });
    if (!tripped) return;
    deps.log.warn(
      { organizationId: input.organizationId, memberId: input.summary.memberId, runId: input.runId },
      "a member's runtime breaker opened",
    );
    Context.current()
      .metricMeter.createCounter(
        'den_runner_breaker_trips_total',
        'trips',
        "Times a member's runtime breaker opened (or opened again after a failed probe).",
      )
      .add(1);
  } catch (error) {
    if (!isPermanent((error as { code?: unknown }).code)) throw error;
    deps.log.error({ organizationId: input.organizationId, runId: input.runId, err: error }, "Postgres rejected a run's breaker outcome");
  }
}

export function createRunActivities(deps: Pick<WorkerDeps<RunsSettings>, 'db' | 'log' | 'settings'>) {
  return {
    /**
     * Appends a batch of applied run events (idempotent on (organization, run, attempt,
     * sequence)) and refreshes the run's row, in one transaction. Retried by the workflow until
     * Postgres takes it; a deleted organization is the one answer that retrying cannot change.
     */
    async persistRunState(input: PersistRunInput): Promise<{ inserted: number; organizationGone: boolean }> {
      try {
        const { inserted } = await persistRun(deps.db, input);
        await recordEnd(deps, input);
        return { inserted, organizationGone: false };
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        if (code === FOREIGN_KEY_VIOLATION) {
          deps.log.warn({ organizationId: input.organizationId, runId: input.runId }, 'run of a deleted organization: not persisted');
          return { inserted: 0, organizationGone: true };
        }
        if (isPermanent(code)) {
          deps.log.error(
            { organizationId: input.organizationId, runId: input.runId, code, err: error },
            'Postgres rejected a run batch permanently',
          );
          throw ApplicationFailure.nonRetryable(`Postgres rejected the batch (SQLSTATE ${String(code)})`, PERSIST_REJECTED);
        }
        throw error;
      }
    },
  };
}

/** The activities as the feature's workflow proxies them. */
export type RunActivities = ReturnType<typeof createRunActivities>;
