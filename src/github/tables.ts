/** The github feature's tables as Kysely sees them; the DDL is in src/app/store/migrations/0004_github.ts and 0007_replays.ts. */
import type { Timestamp, Int8, NullableInt8 } from '../app/store/columns';

export type GithubTargetStatus = 'active' | 'disabled' | 'disconnected';
export type GithubSyncStatus = 'queued' | 'running' | 'completed' | 'skipped' | 'failed';
export type GithubSyncKind = 'push' | 'full_resync';

export interface GithubTables {
  /** A repository an organization connected, optionally pinned to one ref. */
  github_connector_targets: {
    id: string;
    organization_id: string;
    installation_id: Int8;
    /** Unknown until the first delivery names it when created from a full name only. */
    repository_id: NullableInt8;
    repository_full_name: string;
    /** `refs/heads/main`; null means every ref. */
    ref: string | null;
    status: GithubTargetStatus;
    /** Why the status is not active (`installation_suspended`, `repository_deleted`, …). */
    status_reason: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
  };
  /** The sync work a delivery calls for; what a sync executor picks up. */
  github_sync_events: {
    id: string;
    /** The target's organization; null for a push that matched no target. */
    organization_id: string | null;
    delivery_id: string;
    event: string;
    action: string | null;
    kind: GithubSyncKind;
    target_id: string | null;
    installation_id: Int8;
    repository_id: NullableInt8;
    repository_full_name: string | null;
    ref: string | null;
    head_sha: string | null;
    status: GithubSyncStatus;
    outcome: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
  };
  /** Repositories an installation gave the App access to (installation_repositories). */
  github_installation_repositories: {
    installation_id: Int8;
    repository_id: Int8;
    repository_full_name: string;
    status: 'available' | 'removed';
    delivery_id: string;
    updated_at: Timestamp;
  };
  /**
   * The sha256 of each accepted body, per installation (0 for a repository webhook), and the
   * delivery id that first carried it: the same body under another id is a replay (src/github/digests.ts).
   */
  github_delivery_digests: {
    installation_id: Int8;
    body_sha256: string;
    delivery_id: string;
    created_at: Timestamp;
  };
}

declare module '../app/store/schema' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface Database extends GithubTables {}
}
