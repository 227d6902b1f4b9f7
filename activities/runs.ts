import { persistRun, type PersistRunInput } from '../src/runs/store';
import type { ActivityDeps } from './deps';

/** Postgres foreign_key_violation: the organization was deleted while its run was live. */
const FOREIGN_KEY_VIOLATION = '23503';

export function createRunActivities(deps: ActivityDeps) {
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
        if ((error as { code?: unknown }).code === FOREIGN_KEY_VIOLATION) {
          deps.log.warn({ organizationId: input.organizationId, runId: input.runId }, 'run of a deleted organization: not persisted');
          return { inserted: 0, organizationGone: true };
        }
        throw error;
      }
    },
  };
}
