import { randomInt } from 'node:crypto';
import {
  applyInstallationChange,
  applyInstallationRepositories,
  applyRepositoryChange,
  recordPush,
  type DeliveryEffects,
} from '../src/github/delivery-effects';
import { getTarget } from '../src/github/target-records';
import { Context } from '@temporalio/activity';
import { createGithubApi, type GithubApi } from '../src/github/api';
import type { RateLimitKind } from '../src/github/api-errors';
import { reconcileDeliveries, type DeliveriesReconciled } from '../src/github/reconcile-deliveries';
import { reconcileTargets, type RedeliveryMetric, type TargetsReconciled } from '../src/github/reconcile';
import type { GithubDeliveryInput, GithubSyncAttempt, GithubSyncEventRecord, GithubSyncRequest } from '../src/github/contract';
import type { GithubSettings } from '../src/github/settings';
import { runSyncAttempt } from '../src/github/sync';
import { recordFailure } from '../src/github/sync-store';
import { signalTarget } from '../src/github/target-signal';
import type { WorkerDeps } from '../src/app/feature';

type Of<E extends GithubDeliveryInput['event']> = Extract<GithubDeliveryInput, { event: E }>;

type Deps = Pick<WorkerDeps<GithubSettings>, 'db' | 'settings' | 'ingress' | 'platform' | 'log'> & {
  /** The clock the sync and the reconcile read (rate-limit waits, token expiry, the delivery window); tests inject one. */
  now: () => number;
};

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
    // Admitted at the front door already, with the delivery that recorded it.
    await signalTarget(deps.ingress, {
      target,
      signal: { eventId: event.id, full },
      idleMs: deps.settings.sync.idleMs,
      admission: 'bypass',
    });
    signalled += 1;
  }
  return { signalled };
}

/**
 * The reconcile's counts in the worker's metrics, exported by the SDK runtime:
 * den_github_reconcile_total{item} (deliveries seen, redeliveries asked, targets checked and
 * resynced) and den_github_reconcile_errors_total{step} (GitHub's refusals).
 */
function countReconcile(counts: Record<string, number>, error: string | null, step: string): void {
  const meter = Context.current().metricMeter;
  const items = meter.createCounter('den_github_reconcile_total', 'items', 'What the GitHub reconcile looked at and asked for, by item.');
  for (const [item, value] of Object.entries(counts)) items.add(value, { item });
  if (error !== null) {
    meter.createCounter('den_github_reconcile_errors_total', 'errors', 'GitHub refusals met by the reconcile, by step.').add(1, { step });
  }
}

/**
 * A rate limit GitHub answered, in the worker's metrics: den_github_rate_limits_total{limit} and
 * the seconds of wait it set, den_github_rate_limit_wait_seconds_total{limit}.
 */
function countRateLimit(limit: RateLimitKind, waitMs: number): void {
  const meter = Context.current().metricMeter;
  meter.createCounter('den_github_rate_limits_total', 'limits', 'GitHub rate limits met by the sync and the reconcile.').add(1, { limit });
  meter
    .createCounter('den_github_rate_limit_wait_seconds_total', 's', 'Seconds of wait GitHub rate limits set on installations.')
    .add(Math.ceil(waitMs / 1000), { limit });
}

/** What became of the reconcile's redeliveries, in the worker's metrics: den_github_redeliveries_total{outcome}. */
function countRedelivery(outcome: RedeliveryMetric): void {
  Context.current()
    .metricMeter.createCounter(
      'den_github_redeliveries_total',
      'redeliveries',
      'Redeliveries the GitHub reconcile asked for, gave up, saw fail or saw refused.',
    )
    .add(1, { outcome });
}

/**
 * The reconcile's pace in the worker's metrics: den_github_app_points_total (points spent on the
 * App's routes) and den_github_redeliveries_waiting (GUIDs owed an ask after the last run).
 */
function countPace(result: DeliveriesReconciled): void {
  const meter = Context.current().metricMeter;
  meter
    .createCounter('den_github_app_points_total', 'points', "Points the GitHub reconcile spent on the App's routes (a GET 1, a POST 5).")
    .add(result.pointsSpent ?? 0);
  if (result.redeliveriesWaiting !== undefined) {
    meter
      .createGauge('den_github_redeliveries_waiting', 'int', 'guids', 'Deliveries owed a redelivery after the last GitHub reconcile.')
      .set(result.redeliveriesWaiting);
  }
}

/** The reconcile's two halves; without App credentials there is nothing it could ask GitHub. */
function buildReconcileActivities(deps: Deps, api: GithubApi | undefined) {
  const reconcileDeps = (app: GithubApi) => ({
    db: deps.db,
    api: app,
    now: deps.now,
    limits: deps.settings.reconcile,
    appId: deps.settings.app!.appId,
    onRedelivery: countRedelivery,
    onRateLimit: countRateLimit,
    resync: async (target: { targetId: string }, eventId: string) => {
      await notifyTargets(deps, [{ id: eventId, targetId: target.targetId, status: 'queued', outcome: null, created: true }], true);
    },
  });
  const notConfigured = 'GITHUB_APP_ID and a private key are not set';
  return {
    async githubReconcileDeliveries(): Promise<DeliveriesReconciled> {
      if (!api) return { deliveriesSeen: 0, redeliveriesAsked: 0, error: notConfigured };
      const result = await reconcileDeliveries(reconcileDeps(api));
      countReconcile({ deliveries_seen: result.deliveriesSeen, redeliveries_asked: result.redeliveriesAsked }, result.error, 'deliveries');
      countPace(result);
      return result;
    },
    async githubReconcileTargets(): Promise<TargetsReconciled> {
      if (!api) return { targetsChecked: 0, targetsResynced: 0, error: notConfigured };
      const result = await reconcileTargets(reconcileDeps(api));
      countReconcile({ targets_checked: result.targetsChecked, targets_resynced: result.targetsResynced }, result.error, 'targets');
      return result;
    },
  };
}

/**
 * The table effects of a GitHub delivery, each one idempotent transaction, so Temporal's retries
 * (Postgres down, a worker crash mid-commit) never record anything twice; the hand-off to the
 * targets' workflows; one attempt of a target's sync, and the record of one whose activity gave
 * up; and the reconcile's two halves.
 */
export function createGithubActivities(options: Omit<Deps, 'now'> & { now?: () => number }) {
  const deps: Deps = { ...options, now: options.now ?? Date.now };
  const api = deps.settings.app ? createGithubApi(deps.settings.app, deps.settings.apiBaseUrl, { now: deps.now }) : undefined;
  const random = () => randomInt(0, 1_000_000) / 1_000_000;
  const syncDeps = {
    db: deps.db,
    api,
    sync: deps.settings.sync,
    now: deps.now,
    random,
    onRateLimit: countRateLimit,
    onFault: (error: unknown) => deps.log.error({ err: error }, 'github sync failed on an unexpected error; its events end failed'),
  };
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
      return runSyncAttempt(syncDeps, request);
    },
    async githubRecordSyncFailure(input: {
      targetId: string;
      eventIds: string[];
      code: string;
      message: string;
    }): Promise<GithubSyncAttempt> {
      const detail = { code: input.code, message: input.message };
      return {
        outcome: 'failed',
        ...detail,
        attempts: await recordFailure(deps.db, { targetId: input.targetId, eventIds: input.eventIds, error: detail }),
      };
    },
    ...buildReconcileActivities(deps, api),
  };
}

/** The activities as the feature's workflow proxies them. */
export type GithubActivities = ReturnType<typeof createGithubActivities>;
