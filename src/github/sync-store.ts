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

/**
 * What a target's status reason says while it stays active: its branch is gone, its repository
 * has no commit, or its installation lost access. Any later sync that reads the repository
 * clears it (src/github/sync.ts, and the reconcile).
 */
export const KNOWN_STATES = ['ref_missing', 'empty_repository', 'not_accessible'] as const;
export type KnownState = (typeof KNOWN_STATES)[number];

/** The events of the batch that are still open, untouched (a rate-limit wait is decided before an attempt is counted). */
export async function openEvents(db: Db, targetId: string, eventIds: string[]): Promise<string[]> {
  if (eventIds.length === 0) return [];
  const rows = await db
    .selectFrom('github_sync_events')
    .select('id')
    .where('target_id', '=', targetId)
    .where('id', 'in', eventIds)
    .where('status', 'in', OPEN)
    .execute();
  return rows.map((r) => r.id);
}

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

/** A rate limit met during the attempt: it was a wait, not an attempt, so its count is given back; the events stay running. */
export async function recordRateLimited(db: Db, eventIds: string[], error: { code: string; message: string }): Promise<void> {
  if (eventIds.length === 0) return;
  await db
    .updateTable('github_sync_events')
    .set({ attempts: sql`greatest(attempts - 1, 0)`, error_code: error.code, error_message: error.message, updated_at: sql`now()` })
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

/**
 * Ends the batch `failed`. With `target.disable`, the target is disabled for that reason; with
 * `target.state`, it stays active and shows that known state as its reason (both in the same
 * transaction).
 */
export async function recordFailure(
  db: Db,
  failure: {
    targetId: string;
    eventIds: string[];
    error: { code: string; message: string };
    target?: { disable?: string; state?: KnownState };
  },
): Promise<number> {
  const { targetId, eventIds, error, target = {} } = failure;
  return db.transaction().execute(async (trx) => {
    const attempts = await endEvents(trx, eventIds, { status: 'failed', error_code: error.code, error_message: error.message });
    if (target.disable !== undefined || target.state !== undefined) {
      await trx
        .updateTable('github_connector_targets')
        .set({
          status: target.disable === undefined ? 'active' : 'disabled',
          status_reason: target.disable ?? target.state,
          updated_at: sql`now()`,
        })
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

/** What the reconcile saw of an active target's branch: a known state, or none (which clears one it showed). */
export async function recordTargetState(db: Db, targetId: string, state: KnownState | null): Promise<void> {
  await db
    .updateTable('github_connector_targets')
    .set({ status_reason: state, updated_at: sql`now()` })
    .where('id', '=', targetId)
    .where('status', '=', 'active')
    .where((eb) => (state === null ? eb('status_reason', 'in', KNOWN_STATES) : eb('status_reason', 'is distinct from', state)))
    .execute();
}

/** The default branch a target without a ref follows, as the repository API named it. */
export async function recordDefaultBranch(db: Db, targetId: string, branch: string): Promise<void> {
  await db
    .updateTable('github_connector_targets')
    .set({ default_branch: branch, updated_at: sql`now()` })
    .where('id', '=', targetId)
    .where('default_branch', 'is distinct from', branch)
    .execute();
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
    .select(['path', 'blob_sha', 'status', 'type', 'link_target'])
    .where('target_id', '=', targetId)
    .execute();
  return rows.map((r) => ({ path: r.path, blobSha: r.blob_sha, status: r.status, type: r.type, linkTarget: r.link_target }));
}

export interface FetchedFile {
  blob: TreeBlob;
  /** Null for a file skipped for its content (binary, a NUL byte) or that GitHub no longer serves. */
  content: string | null;
  status: GithubFileStatus;
  error: string | null;
}

export interface SyncOutcome {
  headSha: string;
  status: 'completed' | 'partial';
  counts: GithubSyncCounts;
  /** Why the sync is partial beyond invalid files (`tree_too_large`), for the events and the target's last sync. */
  error: { code: string; message: string } | null;
}

/** What becomes of the batch's events whose head is not the synced one (src/github/sync.ts decides). */
export interface HeadDecisions {
  /** A newer head was synced in their place. */
  superseded: string[];
  /** Their head may be newer than the one read: back to queued, for the next sync. */
  reopened: string[];
}

type Trx = Transaction<Database>;

/** The snapshot after the sync: fetched and skipped paths upserted, paths gone deleted. */
async function writeFiles(trx: Trx, targetId: string, { plan, fetched }: { plan: SyncPlan; fetched: FetchedFile[] }): Promise<void> {
  const rows = [
    ...fetched.map((f) => ({ blob: f.blob, content: f.content, status: f.status, error: f.error })),
    ...plan.skip.map((s) => ({ blob: s.blob, content: null, status: 'skipped' as const, error: s.reason })),
  ];
  for (const row of rows) {
    const values = {
      blob_sha: row.blob.sha,
      size: row.blob.size,
      content: row.content,
      status: row.status,
      error: row.error,
      type: row.blob.type ?? 'file',
      link_target: row.blob.linkTarget ?? null,
      updated_at: new Date(),
    };
    await trx
      .insertInto('github_target_files')
      .values({ target_id: targetId, path: row.blob.path, ...values })
      .onConflict((oc) => oc.columns(['target_id', 'path']).doUpdateSet(values))
      .execute();
  }
  if (plan.remove.length > 0) {
    await trx.deleteFrom('github_target_files').where('target_id', '=', targetId).where('path', 'in', plan.remove).execute();
  }
}

/**
 * Commits one sync: the snapshot, the target's synced head and last sync, and the batch's events:
 * those `decisions` name superseded (a newer head was synced) or reopened (queued again, their
 * head may be newer than the one read), every other one ends with the sync's status. A known
 * state the target showed (src/github/sync-store.ts KNOWN_STATES) clears: the sync read its branch.
 */
export async function recordSync(
  db: Db,
  sync: { targetId: string; eventIds: string[]; plan: SyncPlan; fetched: FetchedFile[]; outcome: SyncOutcome; decisions: HeadDecisions },
): Promise<number> {
  const { targetId, eventIds, outcome, decisions } = sync;
  const decided = new Set([...decisions.superseded, ...decisions.reopened]);
  return db.transaction().execute(async (trx) => {
    await writeFiles(trx, targetId, sync);
    if (decisions.reopened.length > 0) {
      await trx
        .updateTable('github_sync_events')
        .set({ status: 'queued', updated_at: sql`now()` })
        .where('id', 'in', decisions.reopened)
        .where('status', 'in', OPEN)
        .execute();
    }
    const superseded = await endEvents(trx, decisions.superseded, {
      status: 'superseded',
      synced_sha: outcome.headSha,
      error_code: null,
      error_message: null,
    });
    const ended = await endEvents(
      trx,
      eventIds.filter((id) => !decided.has(id)),
      {
        status: outcome.status,
        synced_sha: outcome.headSha,
        error_code: outcome.error?.code ?? null,
        error_message: outcome.error?.message ?? null,
      },
    );
    const attempts = Math.max(superseded, ended);
    await trx
      .updateTable('github_connector_targets')
      .set({
        synced_sha: outcome.headSha,
        synced_at: sql`now()`,
        last_sync_status: outcome.status,
        last_sync_attempts: attempts,
        last_sync_counts: JSON.stringify(outcome.counts),
        last_sync_error_code: outcome.error?.code ?? null,
        last_sync_error_message: outcome.error?.message ?? null,
        last_sync_at: sql`now()`,
        pending_sha: newestOpenHead(targetId),
        status_reason: sql`CASE WHEN status = 'active' AND status_reason IN (${sql.join([...KNOWN_STATES])}) THEN NULL ELSE status_reason END`,
      })
      .where('id', '=', targetId)
      .execute();
    return attempts;
  });
}
