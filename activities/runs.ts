import { ApplicationFailure } from '@temporalio/common';
import { PERSIST_REJECTED } from '../src/runs/contract';
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

export function createRunActivities(deps: Pick<WorkerDeps<unknown>, 'db' | 'log'>) {
  return {
    /**
     * Appends a batch of applied run events (idempotent on (organization, run, attempt,
     * sequence)) and refreshes the run's row, in one transaction. Retried by the workflow until
     * Postgres takes it; a deleted organization is the one answer that retrying cannot change.
     */
    async persistRunState(input: PersistRunInput): Promise<{ inserted: number; organizationGone: boolean }> {
      try {
        const { inserted } = await persistRun(deps.db, input);
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
