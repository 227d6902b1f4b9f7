/** The sync events of an organization, as the admin route and the CLI list them, newest first. */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';
import type { GithubSyncKind, GithubSyncStatus } from './tables';

export const SYNC_STATUSES: GithubSyncStatus[] = ['queued', 'running', 'completed', 'partial', 'skipped', 'failed', 'superseded'];

export interface SyncEventView {
  id: string;
  deliveryId: string;
  event: string;
  action: string | null;
  kind: GithubSyncKind;
  targetId: string | null;
  installationId: number;
  repositoryId: number | null;
  repository: string | null;
  ref: string | null;
  headSha: string | null;
  status: GithubSyncStatus;
  outcome: string | null;
  attempts: number;
  /** Why the sync failed (or, while it is retried, the last failure); null otherwise. */
  error: { code: string; message: string } | null;
  syncedSha: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/**
 * An organization's sync events, newest first; never those of an installation another
 * organization owns (events recorded before ownership existed, or before it moved).
 */
export async function listSyncEvents(
  db: Db,
  filter: { organizationId: string; status?: GithubSyncStatus; repo?: string; limit: number },
): Promise<SyncEventView[]> {
  let query = db
    .selectFrom('github_sync_events')
    .selectAll()
    .where('organization_id', '=', filter.organizationId)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('github_installations as i')
            .select(sql`1`.as('one'))
            .whereRef('i.installation_id', '=', 'github_sync_events.installation_id')
            .where('i.organization_id', '<>', filter.organizationId),
        ),
      ),
    )
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(filter.limit);
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.repo) query = query.where(sql<string>`lower(repository_full_name)`, '=', filter.repo.toLowerCase());
  const rows = await query.execute();
  return rows.map((row) => ({
    id: row.id,
    deliveryId: row.delivery_id,
    event: row.event,
    action: row.action,
    kind: row.kind,
    targetId: row.target_id,
    installationId: Number(row.installation_id),
    repositoryId: row.repository_id === null ? null : Number(row.repository_id),
    repository: row.repository_full_name,
    ref: row.ref,
    headSha: row.head_sha,
    status: row.status,
    outcome: row.outcome,
    attempts: row.attempts,
    error: row.error_code === null ? null : { code: row.error_code, message: row.error_message ?? '' },
    syncedSha: row.synced_sha,
    startedAt: row.started_at?.toISOString() ?? null,
    finishedAt: row.finished_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  }));
}
