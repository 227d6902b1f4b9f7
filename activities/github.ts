import {
  applyInstallationChange,
  applyInstallationRepositories,
  applyRepositoryChange,
  recordPush,
  type DeliveryEffects,
} from '../src/github/targets';
import type { GithubDeliveryInput } from '../src/github/contract';
import type { WorkerDeps } from '../src/app/feature';

type Of<E extends GithubDeliveryInput['event']> = Extract<GithubDeliveryInput, { event: E }>;

/**
 * The table effects of a GitHub delivery. Each is one idempotent transaction, so
 * Temporal's retries (Postgres down, a worker crash mid-commit) never record anything twice.
 */
export function createGithubActivities(deps: Pick<WorkerDeps<unknown>, 'db'>) {
  return {
    async githubRecordPush(input: Of<'push'>): Promise<DeliveryEffects> {
      return recordPush(deps.db, input);
    },
    async githubApplyRepositoryChange(input: Of<'repository'>): Promise<DeliveryEffects> {
      return applyRepositoryChange(deps.db, input);
    },
    async githubApplyInstallationChange(input: Of<'installation'>): Promise<DeliveryEffects> {
      return applyInstallationChange(deps.db, input);
    },
    async githubApplyInstallationRepositories(input: Of<'installation_repositories'>): Promise<DeliveryEffects> {
      return applyInstallationRepositories(deps.db, input);
    },
  };
}

/** The activities as the feature's workflow proxies them. */
export type GithubActivities = ReturnType<typeof createGithubActivities>;
