/**
 * GitHub App webhooks: one workflow per delivery, workflows/github.ts. Its id, payload types and
 * search attributes, defined once for the route and the workflow. Deterministic.
 */
import { defineSearchAttributeKey } from '@temporalio/common';

export const githubSearchAttributes = {
  GithubEvent: defineSearchAttributeKey('GithubEvent', 'KEYWORD'),
  GithubDeliveryId: defineSearchAttributeKey('GithubDeliveryId', 'KEYWORD'),
  GithubRepository: defineSearchAttributeKey('GithubRepository', 'KEYWORD'),
} as const;

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
  | { event: 'push'; action: null; installationId: number; repository: GithubRepositoryRef; ref: string; headSha: string }
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
