import {
  ActivityFailure,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { GithubActivities } from '../activities/github';
import { deliverySearchAttributes, summarize } from '../src/github/delivery';
import {
  GITHUB_LOCAL_EFFECTS_PATCH,
  GITHUB_SYNC_OUTCOMES_PATCH,
  GITHUB_SYNC_PROTOCOL,
  GITHUB_TARGET_SYNC_PATCH,
  githubSearchAttributes,
  githubSyncSignal,
  type GithubDeliveryInput,
  type GithubDeliverySummary,
  type GithubReconcileSummary,
  type GithubSyncAttempt,
  type GithubTargetInput,
  type GithubTargetSummary,
} from '../src/github/contract';
import { LOCAL_POSTGRES_EFFECT, localFirst } from './local-first';
import { implementsWorkflow } from '../src/app/temporal/contract';
import { githubDeliveryWorkflow, githubReconcileWorkflow, githubTargetWorkflow } from '../src/github/contract';

// Retries are unbounded on purpose: the delivery was acknowledged to GitHub, which never
// redelivers by itself, so the effects must eventually land (e.g. after a Postgres outage).
const UNBOUNDED_RETRY = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' } as const;
const activities = proxyActivities<GithubActivities>({ startToCloseTimeout: '30s', retry: UNBOUNDED_RETRY });
// The effect is a few milliseconds of Postgres: locally first, which saves the history three
// events and a round trip through the task queue; after 10 s of failures, the same
// effect as a regular activity, still retried without bound.
const effect = localFirst<GithubActivities>(LOCAL_POSTGRES_EFFECT, { startToCloseTimeout: '30s', retry: UNBOUNDED_RETRY });

/** One workflow per GitHub delivery (id `github-delivery/{deliveryId}`): apply its table effects. */
export async function githubDelivery(input: GithubDeliveryInput): Promise<GithubDeliverySummary> {
  if (!patched(GITHUB_LOCAL_EFFECTS_PATCH)) return deliverBeforeLocalEffects(input);
  // The API passes the search attributes at start; a delivery started by an older API has none.
  if (workflowInfo().typedSearchAttributes.get(githubSearchAttributes.GithubEvent) === undefined) {
    upsertSearchAttributes(deliverySearchAttributes(input));
  }
  const effects = await applyEffects(input);
  // Full resyncs (a renamed repository) fetch every blob again; a push only what changed.
  const queued = effects.syncEvents.filter((e) => e.status === 'queued' && e.targetId !== null);
  if (queued.length > 0 && patched(GITHUB_TARGET_SYNC_PATCH)) await effect('githubNotifyTargets', queued, input.event !== 'push');
  return summarize(input, effects);
}

function applyEffects(input: GithubDeliveryInput) {
  switch (input.event) {
    case 'push':
      return effect('githubRecordPush', input);
    case 'repository':
      return effect('githubApplyRepositoryChange', input);
    case 'installation':
      return effect('githubApplyInstallationChange', input);
    case 'installation_repositories':
      return effect('githubApplyInstallationRepositories', input);
  }
}

/** Deliveries that started before GITHUB_LOCAL_EFFECTS_PATCH replay this way. */
async function deliverBeforeLocalEffects(input: GithubDeliveryInput): Promise<GithubDeliverySummary> {
  upsertSearchAttributes(deliverySearchAttributes(input));
  switch (input.event) {
    case 'push':
      return summarize(input, await activities.githubRecordPush(input));
    case 'repository':
      return summarize(input, await activities.githubApplyRepositoryChange(input));
    case 'installation':
      return summarize(input, await activities.githubApplyInstallationChange(input));
    case 'installation_repositories':
      return summarize(input, await activities.githubApplyInstallationRepositories(input));
  }
}

// ---------------------------------------------------------------------------------------
// The target actor: one workflow per target runs its syncs one at a time.

// A sync attempt's GitHub failures come back as results; the activity's own retries are for
// Postgres and worker crashes, bounded so a bug cannot keep a target busy for ever.
const sync = proxyActivities<GithubActivities>({
  startToCloseTimeout: '10m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m', maximumAttempts: 30 },
});
/** Syncs per run before continue-as-new, well inside Temporal's history limits. */
const SYNCS_PER_RUN = 200;

interface Batch {
  eventIds: string[];
  full: boolean;
}

/** Moves every pending request into `batch` (the newest head wins: one sync serves them all). */
function drain(pending: Map<string, boolean>, batch: Batch): Batch {
  for (const [eventId, full] of pending) {
    if (!batch.eventIds.includes(eventId)) batch.eventIds.push(eventId);
    batch.full ||= full;
  }
  pending.clear();
  return batch;
}

/** Runs started before GITHUB_SYNC_OUTCOMES_PATCH sync this way: every wait is an attempt, and a failed activity fails the run. */
async function syncOnceBeforeOutcomes(input: GithubTargetInput, batch: Batch, pending: Map<string, boolean>): Promise<GithubSyncAttempt> {
  for (let attempt = 1; ; attempt++) {
    const result = await sync.githubSyncTarget({ targetId: input.targetId, eventIds: batch.eventIds, full: batch.full, attempt });
    if (result.outcome !== 'retry') return result;
    await sleep(Math.max(1, result.delayMs));
    // Pushes that arrived meanwhile join this sync: the next attempt reads the branch head again.
    drain(pending, batch);
  }
}

/**
 * One attempt. When the activity's own retries (Postgres, worker crashes) run out, the batch ends
 * `failed` (`sync_error`), recorded by an activity retried until Postgres takes it: the workflow
 * itself never fails.
 */
async function attemptSync(input: GithubTargetInput, batch: Batch, attempt: number): Promise<GithubSyncAttempt> {
  try {
    const request = { targetId: input.targetId, eventIds: batch.eventIds, full: batch.full, attempt, protocol: GITHUB_SYNC_PROTOCOL };
    return await sync.githubSyncTarget(request);
  } catch (error) {
    const cause = error instanceof ActivityFailure ? (error.cause ?? error) : error;
    const message = `the sync activity gave up: ${cause instanceof Error ? cause.message : String(cause)}`.slice(0, 300);
    return activities.githubRecordSyncFailure({ targetId: input.targetId, eventIds: batch.eventIds, code: 'sync_error', message });
  }
}

/**
 * One sync: a rate limit is waited out on a timer without using an attempt, GitHub's transient
 * failures are retried with the delay the activity chose, and events the sync reopened (their
 * head may be newer than the one it read) go back to the pending ones.
 */
async function syncOnce(input: GithubTargetInput, pending: Map<string, boolean>): Promise<GithubSyncAttempt> {
  const batch = drain(pending, { eventIds: [], full: false });
  if (!patched(GITHUB_SYNC_OUTCOMES_PATCH)) return syncOnceBeforeOutcomes(input, batch, pending);
  for (let attempt = 1; ;) {
    const result = await attemptSync(input, batch, attempt);
    if (result.outcome === 'rate_limited') await sleep(Math.max(1000, result.waitMs));
    else if (result.outcome === 'retry') {
      await sleep(Math.max(1, result.delayMs));
      attempt += 1;
    } else {
      for (const eventId of result.outcome === 'synced' ? (result.reopened ?? []) : [])
        pending.set(eventId, pending.get(eventId) ?? batch.full);
      return result;
    }
    // Pushes that arrived meanwhile join this sync: the next attempt reads the branch head again.
    drain(pending, batch);
  }
}

function lastStatus(result: GithubSyncAttempt): string {
  if (result.outcome === 'synced') return result.status;
  return result.outcome;
}

/** `github-target/{targetId}`: syncs its target whenever a signal asks, one at a time; closes when quiet. */
export async function githubTarget(input: GithubTargetInput): Promise<GithubTargetSummary> {
  const pending = new Map<string, boolean>((input.pending ?? []).map((p) => [p.eventId, p.full]));
  setHandler(githubSyncSignal, ({ eventId, full }) => {
    pending.set(eventId, (pending.get(eventId) ?? false) || full);
  });
  let syncs = 0;
  let last: GithubSyncAttempt | null = null;
  for (;;) {
    if (!(await condition(() => pending.size > 0, input.idleMs))) return { targetId: input.targetId, syncs, last };
    if (syncs >= SYNCS_PER_RUN || workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof githubTarget>({ ...input, pending: [...pending].map(([eventId, full]) => ({ eventId, full })) });
    }
    last = await syncOnce(input, pending);
    syncs += 1;
    upsertSearchAttributes([{ key: githubSearchAttributes.GithubLastSyncStatus, value: lastStatus(last) }]);
  }
}

// ---------------------------------------------------------------------------------------
// The reconcile, run by its Schedule and by `den github reconcile`.

// GitHub's refusals are results; retries are for Postgres and crashes, few since the next run comes.
const reconcileActivities = proxyActivities<GithubActivities>({
  startToCloseTimeout: '5m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 3 },
});

/** How the run paced its calls to the App's routes (activities from before the pacing report none). */
function paceOf(deliveries: Awaited<ReturnType<GithubActivities['githubReconcileDeliveries']>>) {
  return {
    redeliveriesWaiting: deliveries.redeliveriesWaiting ?? 0,
    pointsSpent: deliveries.pointsSpent ?? 0,
    stoppedBy: deliveries.stoppedBy ?? null,
    resumeAt: deliveries.resumeAt ?? null,
  };
}

/** Asks GitHub again for the deliveries it failed to hand us, and resyncs targets whose branch moved unseen. */
export async function githubReconcile(): Promise<GithubReconcileSummary> {
  const deliveries = await reconcileActivities.githubReconcileDeliveries();
  const targets = await reconcileActivities.githubReconcileTargets();
  // A workflow's result is not a command: the fields added since replay older histories unchanged.
  return {
    deliveriesSeen: deliveries.deliveriesSeen,
    redeliveriesAsked: deliveries.redeliveriesAsked,
    ...(deliveries.redeliveriesCapped === undefined ? {} : { redeliveriesCapped: deliveries.redeliveriesCapped }),
    ...(deliveries.listingComplete === undefined ? {} : { listingComplete: deliveries.listingComplete }),
    ...(deliveries.pointsSpent === undefined ? {} : paceOf(deliveries)),
    targetsChecked: targets.targetsChecked,
    targetsResynced: targets.targetsResynced,
    ...(targets.targetStates === undefined ? {} : { targetStates: targets.targetStates }),
    errors: [deliveries.error, targets.error].filter((e): e is string => e !== null),
  };
}

implementsWorkflow(githubDeliveryWorkflow, githubDelivery);
implementsWorkflow(githubTargetWorkflow, githubTarget);
implementsWorkflow(githubReconcileWorkflow, githubReconcile);
