/**
 * The target sync's Postgres side: events move queued → running → an end status, the snapshot in
 * github_target_files, and the target's synced and pending heads. Every write touches only events
 * still open (queued or running), so a retried activity never reopens an ended event.
 */
import { type Transaction, type UpdateObject, sql } from 'kysely';
import type { Database } from '../app/store/schema';
import type { Db } from '../app/store/db';
import type { SnapshotFile, SyncPlan, TreeBlob } from './manifests';
import type { GithubFileStatus, GithubSyncCounts } from './tables';

const OPEN = ['queued', 'running'] as const;

/** The events of the batch that are still open, marked running with one more attempt. */
export async function startAttempt(
  db: Db,
  targetId: string,
  eventIds: string[],
): Promise<{ id: string; headSha: string | null; ref: string | null }[]> {
  if (eventIds.length === 0) return [];
  const rows = await db
    .updateTable('github_sync_events')
    .set({ status: 'running', attempts: sql`attempts + 1`, started_at: sql`coalesce(started_at, now())`, updated_at: sql`now()` })
    .where('target_id', '=', targetId)
    .where('id', 'in', eventIds)
    .where('status', 'in', OPEN)
    .returning(['id', 'head_sha', 'ref', 'created_at'])
    .execute();
  return rows.sort((a, b) => a.created_at.getTime() - b.created_at.getTime()).map((r) => ({ id: r.id, headSha: r.head_sha, ref: r.ref }));
}

/** A retryable failure: the events stay running, with the last error for operators. */
export async function recordRetry(db: Db, eventIds: string[], error: { code: string; message: string }): Promise<void> {
  if (eventIds.length === 0) return;
  await db
    .updateTable('github_sync_events')
    .set({ error_code: error.code, error_message: error.message, updated_at: sql`now()` })
    .where('id', 'in', eventIds)
    .where('status', 'in', OPEN)
    .execute();
}

/** The newest head still waiting for a sync of the target, for its pending_sha. */
const newestOpenHead = (targetId: string) =>
  sql<
    string | null
  >`(SELECT head_sha FROM github_sync_events WHERE target_id = ${targetId} AND status = 'queued' AND head_sha IS NOT NULL ORDER BY created_at DESC LIMIT 1)`;

/**
 * Ends the batch's events that are still open with `ending`, and answers the most attempts any of
 * them took (0 for none): the target's last sync reports it.
 */
async function endEvents(
  trx: Transaction<Database>,
  eventIds: string[],
  ending: UpdateObject<Database, 'github_sync_events'>,
): Promise<number> {
  if (eventIds.length === 0) return 0;
  const ended = await trx
    .updateTable('github_sync_events')
    .set({ ...ending, finished_at: sql`now()`, updated_at: sql`now()` })
    .where('id', 'in', eventIds)
    .where('status', 'in', OPEN)
    .returning('attempts')
    .execute();
  return Math.max(0, ...ended.map((e) => e.attempts));
}

/** Ends the batch `failed`; with `disable`, the target is disabled for that reason in the same transaction. */
export async function recordFailure(
  db: Db,
  targetId: string,
  eventIds: string[],
  error: { code: string; message: string },
  disable?: string,
): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const attempts = await endEvents(trx, eventIds, { status: 'failed', error_code: error.code, error_message: error.message });
    if (disable !== undefined) {
      await trx
        .updateTable('github_connector_targets')
        .set({ status: 'disabled', status_reason: disable, updated_at: sql`now()` })
        .where('id', '=', targetId)
        .where('status', '=', 'active')
        .execute();
    }
    await trx
      .updateTable('github_connector_targets')
      .set({
        last_sync_status: 'failed',
        last_sync_attempts: attempts,
        last_sync_counts: null,
        last_sync_error_code: error.code,
        last_sync_error_message: error.message,
        last_sync_at: sql`now()`,
        pending_sha: newestOpenHead(targetId),
      })
      .where('id', '=', targetId)
      .execute();
    return attempts;
  });
}

/** The installation was seen to read the repository: the target is verified, and learns the repository's id if it lacked it. */
export async function recordVerified(db: Db, targetId: string, repositoryId: number): Promise<void> {
  await db
    .updateTable('github_connector_targets')
    .set({ repository_verified_at: sql`now()`, repository_id: sql`coalesce(repository_id, ${repositoryId})`, updated_at: sql`now()` })
    .where('id', '=', targetId)
    .execute();
}

export async function loadSnapshot(db: Db, targetId: string): Promise<SnapshotFile[]> {
  const rows = await db
    .selectFrom('github_target_files')
    .select(['path', 'blob_sha', 'status'])
    .where('target_id', '=', targetId)
    .execute();
  return rows.map((r) => ({ path: r.path, blobSha: r.blob_sha, status: r.status }));
}

export interface FetchedFile {
  blob: TreeBlob;
  content: string;
  status: GithubFileStatus;
  error: string | null;
}

export interface SyncOutcome {
  headSha: string;
  status: 'completed' | 'partial';
  counts: GithubSyncCounts;
}

type Trx = Transaction<Database>;

/** The snapshot after the sync: fetched and skipped paths upserted, paths gone deleted. */
async function writeFiles(trx: Trx, targetId: string, plan: SyncPlan, fetched: FetchedFile[]): Promise<void> {
  const rows = [
    ...fetched.map((f) => ({
      path: f.blob.path,
      sha: f.blob.sha,
      size: f.blob.size,
      content: f.content,
      status: f.status,
      error: f.error,
    })),
    ...plan.skip.map((s) => ({
      path: s.blob.path,
      sha: s.blob.sha,
      size: s.blob.size,
      content: null,
      status: 'skipped' as const,
      error: s.reason,
    })),
  ];
  for (const row of rows) {
    const values = {
      blob_sha: row.sha,
      size: row.size,
      content: row.content,
      status: row.status,
      error: row.error,
      updated_at: new Date(),
    };
    await trx
      .insertInto('github_target_files')
      .values({ target_id: targetId, path: row.path, ...values })
      .onConflict((oc) => oc.columns(['target_id', 'path']).doUpdateSet(values))
      .execute();
  }
  if (plan.remove.length > 0) {
    await trx.deleteFrom('github_target_files').where('target_id', '=', targetId).where('path', 'in', plan.remove).execute();
  }
}

/**
 * Commits one sync: the snapshot, the target's synced head and last sync, and the batch's events:
 * those of the synced head (or of no head: a resync) end with the sync's status, the others
 * `superseded`, since a newer head was synced in their place.
 */
export async function recordSync(
  db: Db,
  sync: { targetId: string; eventIds: string[]; plan: SyncPlan; fetched: FetchedFile[]; outcome: SyncOutcome },
): Promise<number> {
  const { targetId, eventIds, outcome } = sync;
  return db.transaction().execute(async (trx) => {
    await writeFiles(trx, targetId, sync.plan, sync.fetched);
    const attempts = await endEvents(trx, eventIds, {
      status: sql`CASE WHEN head_sha IS NULL OR head_sha = ${outcome.headSha} THEN ${outcome.status} ELSE 'superseded' END`,
      synced_sha: outcome.headSha,
      error_code: null,
      error_message: null,
    });
    await trx
      .updateTable('github_connector_targets')
      .set({
        synced_sha: outcome.headSha,
        synced_at: sql`now()`,
        last_sync_status: outcome.status,
        last_sync_attempts: attempts,
        last_sync_counts: JSON.stringify(outcome.counts),
        last_sync_error_code: null,
        last_sync_error_message: null,
        last_sync_at: sql`now()`,
        pending_sha: newestOpenHead(targetId),
      })
      .where('id', '=', targetId)
      .execute();
    return attempts;
  });
}
