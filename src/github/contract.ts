/**
 * GitHub App webhooks: one workflow per delivery, workflows/github.ts. Its id, payload types and
 * search attributes, defined once for the route and the workflow. Deterministic.
 */
import { defineSearchAttributeKey } from '@temporalio/common';
import { defineSignal } from '@temporalio/workflow';
import { workflowRef } from '../app/temporal/contract';

export const githubSearchAttributes = {
  GithubEvent: defineSearchAttributeKey('GithubEvent', 'KEYWORD'),
  GithubDeliveryId: defineSearchAttributeKey('GithubDeliveryId', 'KEYWORD'),
  GithubRepository: defineSearchAttributeKey('GithubRepository', 'KEYWORD'),
  GithubTargetId: defineSearchAttributeKey('GithubTargetId', 'KEYWORD'),
  GithubLastSyncStatus: defineSearchAttributeKey('GithubLastSyncStatus', 'KEYWORD'),
} as const;

/**
 * Patch id (`patched()`): from it on, a delivery that queued sync events hands them to each
 * target's workflow (signal-with-start). Deliveries started before only recorded them.
 */
export const GITHUB_TARGET_SYNC_PATCH = 'github-target-sync';

/**
 * Patch id (`patched()`): from it on, a target's workflow waits out a rate limit on a timer without
 * using an attempt, takes back the events a sync reopened, and ends a batch whose activity failed
 * for good with a recorded `failed` instead of failing itself. Runs started before keep the old way.
 */
export const GITHUB_SYNC_OUTCOMES_PATCH = 'github-sync-outcomes';

/** The sync protocol a workflow speaks: the activity answers `rate_limited` and reopens events only to one that says 2. */
export const GITHUB_SYNC_PROTOCOL = 2;

/** One actor per target: it runs that target's syncs one at a time. */
export function githubTargetWorkflowId(targetId: string): string {
  return `github-target/${targetId}`;
}

/** The signal a target's workflow receives for each sync event (a push, a resync, a reconcile). */
const GITHUB_SYNC_SIGNAL = 'githubSyncRequested';

export interface GithubSyncSignal {
  eventId: string;
  /** Fetch every blob again, not only those whose SHA changed. */
  full: boolean;
}

export const githubSyncSignal = defineSignal<[GithubSyncSignal]>(GITHUB_SYNC_SIGNAL);

export interface GithubTargetInput {
  targetId: string;
  repository: string;
  /** How long the workflow waits for work before it closes (GITHUB_TARGET_IDLE). */
  idleMs: number;
  /** Signals received and not yet synced, carried over a continue-as-new. */
  pending?: GithubSyncSignal[];
}

/** What the target workflow asks of one sync attempt. */
export interface GithubSyncRequest {
  targetId: string;
  eventIds: string[];
  full: boolean;
  /** 1 for the first attempt; the activity turns a retryable failure into `failed` at GITHUB_SYNC_MAX_ATTEMPTS. A rate-limit wait is not an attempt. */
  attempt: number;
  /**
   * GITHUB_SYNC_PROTOCOL from a workflow that waits out rate limits and takes back reopened events;
   * unset from one started before (it gets `retry` for a rate limit, and no event is reopened).
   */
  protocol?: number;
}

export type GithubSyncAttempt =
  | {
      outcome: 'synced';
      status: 'completed' | 'partial';
      headSha: string;
      counts: { added: number; changed: number; removed: number; skipped: number; invalid: number };
      attempts: number;
      /** Why the sync is partial beyond invalid files: `tree_too_large`. */
      error?: { code: string; message: string } | null;
      /** Events queued again: their head may be newer than the one this sync read. */
      reopened?: string[];
    }
  | { outcome: 'retry'; code: string; message: string; delayMs: number }
  /** GitHub rate-limits the installation until `untilMs` (epoch ms): wait `waitMs` on a timer, then ask again (not an attempt). */
  | { outcome: 'rate_limited'; untilMs: number; waitMs: number }
  | { outcome: 'failed'; code: string; message: string; attempts: number }
  | { outcome: 'not_configured' }
  /** Every event of the batch had already ended (a repeated signal): nothing to do. */
  | { outcome: 'nothing_open' };

/** The target workflow's result when it closes after a quiet period. */
export interface GithubTargetSummary {
  targetId: string;
  syncs: number;
  last: GithubSyncAttempt | null;
}

/** The reconcile Schedule of the workers polling `taskQueue`, and the prefix of its runs' ids. */
export function githubReconcileScheduleId(taskQueue: string): string {
  return `github-reconcile/${taskQueue}`;
}

/**
 * A target the reconcile found in a known state (its branch gone, its repository empty, its access
 * lost), or whose installation GitHub refused a token (suspended or gone: the target took that state).
 */
export interface GithubTargetState {
  targetId: string;
  repository: string;
  state: 'ref_missing' | 'empty_repository' | 'not_accessible' | 'installation_suspended' | 'installation_deleted';
}

/** The reconcile workflow's result: what it looked at and asked for, and GitHub's refusals. */
export interface GithubReconcileSummary {
  deliveriesSeen: number;
  redeliveriesAsked: number;
  /** GUIDs given up this run at GITHUB_RECONCILE_MAX_REDELIVERIES (runs from before it carry none). */
  redeliveriesCapped?: number;
  /** False when the page cap stopped the listing: the next reconcile goes on from its cursor. */
  listingComplete?: boolean;
  /** GUIDs owed a redelivery after this run: left by its cap, the App's budget or a rate limit, or not taken by GitHub (422, 5xx). */
  redeliveriesWaiting?: number;
  /** Points this run spent on the App's routes (a GET 1, a POST 5), from GITHUB_RECONCILE_POINTS_PER_MINUTE. */
  pointsSpent?: number;
  /** Why the run stopped calling the App's routes before it was done (`run_cap`, `budget`, `rate_limit`, `busy`: another run holds them), or null. */
  stoppedBy?: 'run_cap' | 'budget' | 'rate_limit' | 'busy' | null;
  /** When the App's routes may be called again, after the budget or a rate limit stopped the run. */
  resumeAt?: string | null;
  targetsChecked: number;
  targetsResynced: number;
  /** Targets in a known state, each with it: reported, not errors. */
  targetStates?: GithubTargetState[];
  /** The first refusal of each half (the delivery log, the branch heads); empty when GitHub answered. */
  errors: string[];
}

/**
 * Patch id (`patched()`): from it on, the route passes the search attributes at start and the
 * effect runs as a local activity first. Deliveries started before replay the old way.
 */
export const GITHUB_LOCAL_EFFECTS_PATCH = 'github-local-effects';

export function githubDeliveryWorkflowId(deliveryId: string): string {
  return `github-delivery/${deliveryId}`;
}

export interface GithubRepositoryRef {
  id: number;
  /** `owner/name`, as GitHub sent it. */
  fullName: string;
}

/**
 * The compact, already-classified delivery the workflow works on. Never the raw payload: a
 * push can be 25 MB and Temporal payloads fail at 2 MB.
 */
export type GithubDeliveryInput = { deliveryId: string; receivedAt: number } & (
  | {
      event: 'push';
      action: null;
      installationId: number;
      repository: GithubRepositoryRef;
      ref: string;
      headSha: string;
      /** The repository's default branch as the push names it (`main`); absent from deliveries accepted before it was read. */
      defaultBranch?: string | null;
    }
  | { event: 'installation'; action: 'deleted' | 'suspend' | 'unsuspend'; installationId: number }
  | {
      event: 'installation_repositories';
      action: 'added' | 'removed';
      installationId: number;
      repositories: GithubRepositoryRef[];
    }
  | {
      event: 'repository';
      action: 'renamed' | 'deleted' | 'transferred';
      /** Null when the hook is a repository webhook rather than an App's. */
      installationId: number | null;
      repository: GithubRepositoryRef;
      /** The names the repository had before (renamed: old name; transferred: old owner). */
      previousFullNames: string[];
    }
);

type GithubEventName = GithubDeliveryInput['event'];

export interface GithubSyncEventRecord {
  id: string;
  targetId: string | null;
  status: 'queued' | 'skipped';
  outcome: string | null;
  /** False when an equal event (same target and head, or same delivery) already existed. */
  created: boolean;
}

export interface GithubTargetChange {
  targetId: string;
  field: 'status' | 'repositoryFullName';
  from: string;
  to: string;
}

/** The workflow's result: what the delivery changed, for operators. */
export interface GithubDeliverySummary {
  deliveryId: string;
  event: GithubEventName;
  action: string | null;
  syncEvents: GithubSyncEventRecord[];
  targetChanges: GithubTargetChange[];
  /** installation_repositories: repositories recorded as available (added) or removed. */
  repositoriesRecorded: number;
}

/** The workflow of one delivery (workflows/github.ts). */
export const githubDeliveryWorkflow = workflowRef<[GithubDeliveryInput], GithubDeliverySummary>('githubDelivery');
/** One target's actor: syncs, one at a time, until idle (workflows/github.ts). */
export const githubTargetWorkflow = workflowRef<[GithubTargetInput], GithubTargetSummary>('githubTarget');
/** The reconcile, run by its Schedule or `den github reconcile` (workflows/github.ts). */
export const githubReconcileWorkflow = workflowRef<[], GithubReconcileSummary>('githubReconcile');
