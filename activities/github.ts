import { fairnessKey } from '../src/app/temporal/fairness';
import { randomInt } from 'node:crypto';
import {
  applyInstallationChange,
  applyInstallationRepositories,
  applyRepositoryChange,
  getTarget,
  recordPush,
  type DeliveryEffects,
} from '../src/github/targets';
import { createGithubApi } from '../src/github/api';
import {
  GITHUB_SYNC_SIGNAL,
  githubSearchAttributes,
  githubTargetWorkflowId,
  type GithubDeliveryInput,
  type GithubSyncEventRecord,
  type GithubSyncRequest,
  type GithubSyncSignal,
  type GithubTargetInput,
} from '../src/github/contract';
import type { GithubSettings } from '../src/github/settings';
import { runSyncAttempt } from '../src/github/sync';
import type { WorkerDeps } from '../src/app/feature';

type Of<E extends GithubDeliveryInput['event']> = Extract<GithubDeliveryInput, { event: E }>;

type Deps = Pick<WorkerDeps<GithubSettings>, 'db' | 'settings' | 'temporal' | 'platform'>;

/**
 * Hands each queued sync event to its target's workflow, starting it if it is not running.
 * Without App credentials nothing is started: the events stay queued and the targets show
 * `not_configured`, so no workflow retries a sync that cannot run.
 */
async function notifyTargets(deps: Deps, events: GithubSyncEventRecord[], full: boolean): Promise<{ signalled: number }> {
  if (!deps.settings.app) return { signalled: 0 };
  let signalled = 0;
  for (const event of events) {
    if (event.targetId === null || event.status !== 'queued') continue;
    const target = await getTarget(deps.db, event.targetId);
    if (!target) continue;
    const input: GithubTargetInput = { targetId: target.targetId, repository: target.repository, idleMs: deps.settings.sync.idleMs };
    const signal: GithubSyncSignal = { eventId: event.id, full };
    await deps.temporal.client.workflow.signalWithStart('githubTarget', {
      workflowId: githubTargetWorkflowId(target.targetId),
      taskQueue: deps.platform.taskQueue,
      args: [input],
      signal: GITHUB_SYNC_SIGNAL,
      signalArgs: [signal],
      typedSearchAttributes: [
        { key: githubSearchAttributes.GithubTargetId, value: target.targetId },
        { key: githubSearchAttributes.GithubRepository, value: target.repository },
      ],
      // A workflow started from an activity inherits no priority: the target's organization is
      // its fairness key like every start of the front door's (ignored while the server's
      // fairness is off). Its weight stays the default; the front door's starts carry the set one.
      priority: { fairnessKey: fairnessKey(target.organizationId) },
    });
    signalled += 1;
  }
  return { signalled };
}

/**
 * The table effects of a GitHub delivery, each one idempotent transaction, so Temporal's retries
 * (Postgres down, a worker crash mid-commit) never record anything twice; the hand-off to the
 * targets' workflows; and one attempt of a target's sync.
 */
export function createGithubActivities(deps: Deps) {
  const api = deps.settings.app ? createGithubApi(deps.settings.app, deps.settings.apiBaseUrl) : undefined;
  const random = () => randomInt(0, 1_000_000) / 1_000_000;
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
    async githubNotifyTargets(events: GithubSyncEventRecord[], full: boolean): Promise<{ signalled: number }> {
      return notifyTargets(deps, events, full);
    },
    async githubSyncTarget(request: GithubSyncRequest) {
      return runSyncAttempt({ db: deps.db, api, sync: deps.settings.sync, now: Date.now, random }, request);
    },
  };
}

/** The activities as the feature's workflow proxies them. */
export type GithubActivities = ReturnType<typeof createGithubActivities>;
