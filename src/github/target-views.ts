/**
 * Targets as the admin routes and the CLI show them: the target, where its sync stands, and its
 * snapshot's files. Reads only, each scoped to one organization; the records themselves are in
 * src/github/target-records.ts.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';
import type { GithubFileStatus, GithubFileType, GithubSyncCounts, GithubSyncStatus } from './tables';
import type { GithubTarget } from './target-records';

export type TargetSyncState = 'idle' | 'queued' | 'running' | 'rate_limited' | 'failed' | 'not_configured';

export interface TargetView {
  targetId: string;
  installationId: number;
  repository: string;
  ref: string | null;
  /** The repository's default branch as last learnt: what a target without a ref follows. */
  defaultBranch: string | null;
  status: GithubTarget['status'];
  statusReason: string | null;
  repositoryVerified: boolean;
  sync: TargetSyncState;
  /** While `sync` is `rate_limited`: when GitHub lets the installation call again (ISO time); null otherwise. */
  until: string | null;
  syncedSha: string | null;
  syncedAt: string | null;
  pendingSha: string | null;
  /** The snapshot's paths kept without content, by reason (`submodule`, `symlink_outside`, `too_large`, …). */
  skipped: Record<string, number>;
  lastSync: {
    status: GithubSyncStatus;
    attempts: number;
    counts: GithubSyncCounts | null;
    error: { code: string; message: string } | null;
    at: string | null;
  } | null;
  createdAt: string;
}

/** Where the sync stands: running or queued work (waiting on its installation's rate limit, if GitHub set one), else the last sync's end. */
function syncState(state: {
  configured: boolean;
  open: { status: string; n: number }[];
  lastSyncStatus: GithubSyncStatus | null;
  waitingUntil: Date | null;
}): TargetSyncState {
  const { configured, open, lastSyncStatus, waitingUntil } = state;
  const has = (status: string) => open.some((o) => o.status === status && o.n > 0);
  if (!configured) return 'not_configured';
  if (waitingUntil !== null && (has('running') || has('queued'))) return 'rate_limited';
  if (has('running')) return 'running';
  if (has('queued')) return 'queued';
  return lastSyncStatus === 'failed' ? 'failed' : 'idle';
}

export async function viewTarget(
  db: Db,
  which: {
    organizationId: string;
    targetId: string;
    /** Whether the App's credentials are set: without them the sync shows `not_configured`. */
    configured: boolean;
    now?: number;
  },
): Promise<TargetView | undefined> {
  const { organizationId, targetId, configured, now = Date.now() } = which;
  const row = await db
    .selectFrom('github_connector_targets as t')
    .selectAll('t')
    .select((eb) =>
      eb
        .selectFrom('github_installations as i')
        .select('i.rate_limited_until')
        .whereRef('i.installation_id', '=', 't.installation_id')
        .as('rate_limited_until'),
    )
    .where('t.id', '=', targetId)
    .where('t.organization_id', '=', organizationId)
    .executeTakeFirst();
  if (!row) return undefined;
  const open = await db
    .selectFrom('github_sync_events')
    .select(['status', sql<number>`count(*)::int`.as('n')])
    .where('target_id', '=', targetId)
    .where('status', 'in', ['queued', 'running'])
    .groupBy('status')
    .execute();
  const skipped = await db
    .selectFrom('github_target_files')
    .select(['error', sql<number>`count(*)::int`.as('n')])
    .where('target_id', '=', targetId)
    .where('status', '=', 'skipped')
    .groupBy('error')
    .orderBy('error')
    .execute();
  const waitingUntil = row.rate_limited_until !== null && row.rate_limited_until.getTime() > now ? row.rate_limited_until : null;
  const sync = syncState({ configured, open, lastSyncStatus: row.last_sync_status, waitingUntil });
  return {
    targetId: row.id,
    installationId: Number(row.installation_id),
    repository: row.repository_full_name,
    ref: row.ref,
    defaultBranch: row.default_branch,
    status: row.status,
    statusReason: row.status_reason,
    repositoryVerified: row.repository_verified_at !== null,
    sync,
    until: sync === 'rate_limited' ? waitingUntil!.toISOString() : null,
    syncedSha: row.synced_sha,
    syncedAt: row.synced_at?.toISOString() ?? null,
    pendingSha: row.pending_sha,
    skipped: Object.fromEntries(skipped.map((s) => [s.error ?? 'unknown', s.n])),
    lastSync:
      row.last_sync_status === null
        ? null
        : {
            status: row.last_sync_status,
            attempts: row.last_sync_attempts ?? 0,
            counts: row.last_sync_counts,
            error:
              row.last_sync_error_code === null ? null : { code: row.last_sync_error_code, message: row.last_sync_error_message ?? '' },
            at: row.last_sync_at?.toISOString() ?? null,
          },
    createdAt: row.created_at.toISOString(),
  };
}

export interface FileView {
  path: string;
  /** What git's tree names at the path: a blob's SHA (for a followed link, the blob it leads to), or a submodule's commit. */
  blobSha: string;
  size: number;
  status: GithubFileStatus;
  /** `file`, `symlink` (the path is a link: synced as what it leads to, or skipped) or `submodule` (never fetched). */
  type: GithubFileType;
  /** The path a link led to (the content is that file's), or, for a link not followed, the path it names. */
  linkTarget?: string;
  /** A submodule's commit. */
  commitSha?: string;
  error?: string;
  content?: string | null;
}

/** Content of one file, and of all of them together, past which `content` is null. */
export const FILE_CONTENT_LIMITS = { perFile: 256 * 1024, total: 4 * 1024 * 1024 };

export async function listFiles(db: Db, targetId: string, withContent: boolean): Promise<FileView[]> {
  const rows = await db.selectFrom('github_target_files').selectAll().where('target_id', '=', targetId).orderBy('path').execute();
  let budget = FILE_CONTENT_LIMITS.total;
  return rows.map((row) => {
    const view: FileView = {
      path: row.path,
      blobSha: row.blob_sha,
      size: Number(row.size),
      status: row.status,
      type: row.type,
      ...(row.link_target === null ? {} : { linkTarget: row.link_target }),
      ...(row.type === 'submodule' ? { commitSha: row.blob_sha } : {}),
      ...(row.error === null ? {} : { error: row.error }),
    };
    if (!withContent) return view;
    const length = row.content === null ? 0 : Buffer.byteLength(row.content);
    const fits = row.content !== null && length <= FILE_CONTENT_LIMITS.perFile && length <= budget;
    if (fits) budget -= length;
    return { ...view, content: fits ? row.content : null };
  });
}
