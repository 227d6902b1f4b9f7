/**
 * The github feature's tables as Kysely sees them; the DDL is in src/app/store/migrations/0004_github.ts,
 * 0007_replays.ts, 0008_github_sync.ts, 0010_github_reconcile.ts, 0011_installation_bindings.ts,
 * 0013_github_limits.ts and 0017_github_round2.ts.
 */
import type { ColumnType } from 'kysely';
import type { Timestamp, Int8, NullableInt8, NullableTimestamp } from '../app/store/columns';

export type GithubTargetStatus = 'active' | 'disabled' | 'disconnected';
export type GithubSyncStatus = 'queued' | 'running' | 'completed' | 'partial' | 'skipped' | 'failed' | 'superseded';
export type GithubFileStatus = 'ok' | 'invalid' | 'skipped';
/** What a kept path is in the repository's tree. */
export type GithubFileType = 'file' | 'symlink' | 'submodule';

/** What one sync changed in the snapshot. */
export interface GithubSyncCounts {
  added: number;
  changed: number;
  removed: number;
  skipped: number;
  invalid: number;
}
export type GithubSyncKind = 'push' | 'full_resync';
/** How an installation was bound: backfilled from existing targets, by an operator's `den`, or by the App's install flow. */
export type GithubBindingSource = 'migration' | 'operator' | 'install_flow';

export interface GithubTables {
  /** A repository an organization connected, optionally pinned to one ref. */
  github_connector_targets: {
    id: string;
    organization_id: string;
    installation_id: Int8;
    /** Unknown until the first delivery names it when created from a full name only. */
    repository_id: NullableInt8;
    repository_full_name: string;
    /** `refs/heads/main`; null follows the repository's default branch. */
    ref: string | null;
    /** The repository's default branch (`main`), as a push or the repository API last named it. */
    default_branch: string | null;
    status: GithubTargetStatus;
    /** Why the status is not active (`installation_suspended`, `repository_deleted`, …). */
    status_reason: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
    /** The commit the snapshot in github_target_files is of, and when it was taken. */
    synced_sha: string | null;
    synced_at: NullableTimestamp;
    /** The newest pushed head not synced yet. */
    pending_sha: string | null;
    last_sync_status: GithubSyncStatus | null;
    last_sync_attempts: number | null;
    last_sync_counts: ColumnType<GithubSyncCounts | null, string | null, string | null>;
    last_sync_error_code: string | null;
    last_sync_error_message: string | null;
    last_sync_at: NullableTimestamp;
    /** When the installation was seen to reach the repository; null: the next sync checks it first. */
    repository_verified_at: NullableTimestamp;
  };
  /** Each App installation's owner: only it connects targets there, and the deliveries count against its share. */
  github_installations: {
    installation_id: Int8;
    organization_id: string;
    /** The GitHub account the App is installed on, when the install flow learnt it. */
    account_login: string | null;
    bound_via: GithubBindingSource;
    /** The admin who completed the install flow. */
    bound_by_member_id: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
    /** Until when GitHub rate-limits the installation: every target on it waits (one installation, one budget). */
    rate_limited_until: NullableTimestamp;
    /** Rate limits without a stated time met in a row; each doubles the next wait. */
    rate_limit_strikes: ColumnType<number, number | undefined, number>;
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
    attempts: ColumnType<number, number | undefined, number>;
    started_at: NullableTimestamp;
    finished_at: NullableTimestamp;
    /** The head the sync that ended this event actually took (the branch head when it started). */
    synced_sha: string | null;
    error_code: string | null;
    error_message: string | null;
  };
  /** A target's snapshot: one row per kept path (content null when skipped). */
  github_target_files: {
    target_id: string;
    path: string;
    blob_sha: string;
    size: Int8;
    content: string | null;
    status: GithubFileStatus;
    error: string | null;
    updated_at: Timestamp;
    type: ColumnType<GithubFileType, GithubFileType | undefined, GithubFileType>;
    /** The path a link led to (its content's), or the path a link that was not followed names. */
    link_target: string | null;
  };
  /** When the reconcile last listed the top of the App's webhook delivery log, and a listing it must still finish. */
  github_reconcile_state: {
    id: string;
    last_run_at: Timestamp;
    /** The next page of a listing the page cap cut short, and the bound it must still reach. */
    carried_cursor: string | null;
    carried_until: NullableTimestamp;
  };
  /** Each GUID the reconcile asked GitHub to redeliver, with its asks and how it stands. */
  github_redeliveries: {
    guid: string;
    event: string;
    /** The newest attempt the reconcile saw of it, and its status code (0: nothing answered). */
    last_attempt_id: Int8;
    last_status_code: number;
    /** The attempt the last accepted ask redelivered. */
    asked_attempt_id: NullableInt8;
    /** Asks counted toward GITHUB_RECONCILE_MAX_REDELIVERIES, and those that were not (our own 503 overloaded or busy). */
    tries: ColumnType<number, number | undefined, number>;
    uncounted_tries: ColumnType<number, number | undefined, number>;
    outcome: 'asked' | 'delivered' | 'capped' | 'rejected' | 'ask_refused' | 'ask_failed' | 'waiting';
    last_error: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
  };
  /** One row per redelivery the reconcile asked for, with GitHub's answer. */
  github_redelivery_tries: {
    guid: string;
    attempt_id: Int8;
    counted: boolean;
    answer: string;
    asked_at: Timestamp;
  };
  /** Every call the reconcile made with the App's JWT and its points: one budget a minute for every worker. */
  github_app_points: {
    app_id: string;
    spent_at: Date;
    points: number;
  };
  /** Until when GitHub rate-limits the App's own routes, and the limits without a stated time met in a row. */
  github_app_limits: {
    app_id: string;
    limited_until: Date;
    strikes: ColumnType<number, number | undefined, number>;
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
