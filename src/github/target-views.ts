/**
 * Targets as the admin routes and the CLI show them: the target, where its sync stands, and its
 * snapshot's files. Reads only, each scoped to one organization; the records themselves are in
 * src/github/target-records.ts.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';
import type { GithubFileStatus, GithubSyncCounts, GithubSyncStatus } from './tables';
import type { GithubTarget } from './target-records';

export type TargetSyncState = 'idle' | 'queued' | 'running' | 'failed' | 'not_configured';

export interface TargetView {
  targetId: string;
  installationId: number;
  repository: string;
  ref: string | null;
  status: GithubTarget['status'];
  statusReason: string | null;
  repositoryVerified: boolean;
  sync: TargetSyncState;
  syncedSha: string | null;
  syncedAt: string | null;
  pendingSha: string | null;
  lastSync: {
    status: GithubSyncStatus;
    attempts: number;
    counts: GithubSyncCounts | null;
    error: { code: string; message: string } | null;
    at: string | null;
  } | null;
  createdAt: string;
}

export async function viewTarget(db: Db, organizationId: string, targetId: string, configured: boolean): Promise<TargetView | undefined> {
  const row = await db
    .selectFrom('github_connector_targets')
    .selectAll()
    .where('id', '=', targetId)
    .where('organization_id', '=', organizationId)
    .executeTakeFirst();
  if (!row) return undefined;
  const open = await db
    .selectFrom('github_sync_events')
    .select(['status', sql<number>`count(*)::int`.as('n')])
    .where('target_id', '=', targetId)
    .where('status', 'in', ['queued', 'running'])
    .groupBy('status')
    .execute();
  const has = (status: string) => open.some((o) => o.status === status && o.n > 0);
  const sync: TargetSyncState = !configured
    ? 'not_configured'
    : has('running')
      ? 'running'
      : has('queued')
        ? 'queued'
        : row.last_sync_status === 'failed'
          ? 'failed'
          : 'idle';
  return {
    targetId: row.id,
    installationId: Number(row.installation_id),
    repository: row.repository_full_name,
    ref: row.ref,
    status: row.status,
    statusReason: row.status_reason,
    repositoryVerified: row.repository_verified_at !== null,
    sync,
    syncedSha: row.synced_sha,
    syncedAt: row.synced_at?.toISOString() ?? null,
    pendingSha: row.pending_sha,
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
  blobSha: string;
  size: number;
  status: GithubFileStatus;
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
      ...(row.error === null ? {} : { error: row.error }),
    };
    if (!withContent) return view;
    const length = row.content === null ? 0 : Buffer.byteLength(row.content);
    const fits = row.content !== null && length <= FILE_CONTENT_LIMITS.perFile && length <= budget;
    if (fits) budget -= length;
    return { ...view, content: fits ? row.content : null };
  });
}
