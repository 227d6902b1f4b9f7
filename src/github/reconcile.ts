/**
 * The reconcile, so that nothing is lost while the service was down or refusing: GitHub's log
 * of the App's deliveries is read since the last reconcile and each lost delivery asked for
 * again, and every active target's branch head is compared with what it has synced. GitHub's
 * refusals come back as the result's `error` (the next run tries again); Postgres failures throw,
 * for the activity to retry.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';
import { asGithubFailure, type GithubApi } from './api';
import { branchOf, headDrifted, pickRedeliveries, reconcileSince } from './reconcile-rules';
import { getTarget, recordResync, type GithubTarget } from './target-records';

const STATE_ID = 'deliveries';

export interface ReconcileDeps {
  db: Db;
  api: GithubApi;
  now: () => number;
  /** Hands a recorded resync event to the target's workflow. */
  resync: (target: GithubTarget, eventId: string) => Promise<void>;
}

/** GitHub's answer in a line (status and message); anything that is not an HTTP error is rethrown. */
function githubError(error: unknown, what: string): string {
  if ((error as Error)?.name !== 'HttpError') throw error;
  const failure = asGithubFailure(error);
  return `${what}: ${failure.status ?? 'network'} ${failure.message}`;
}

async function lastRun(db: Db): Promise<number | undefined> {
  const row = await db.selectFrom('github_reconcile_state').select('last_run_at').where('id', '=', STATE_ID).executeTakeFirst();
  return row?.last_run_at.getTime();
}

async function saveLastRun(db: Db, at: number): Promise<void> {
  await db
    .insertInto('github_reconcile_state')
    .values({ id: STATE_ID, last_run_at: new Date(at) })
    .onConflict((oc) => oc.column('id').doUpdateSet({ last_run_at: new Date(at) }))
    .execute();
}

export interface DeliveriesReconciled {
  deliveriesSeen: number;
  redeliveriesAsked: number;
  error: string | null;
}

/**
 * Asks GitHub once for each delivery that failed on every attempt since the last reconcile. The
 * cursor moves only when every ask was accepted, so a refused one is asked again next time.
 */
export async function reconcileDeliveries(deps: ReconcileDeps): Promise<DeliveriesReconciled> {
  const startedAt = deps.now();
  let deliveries;
  try {
    deliveries = await deps.api.deliveriesSince(reconcileSince(await lastRun(deps.db), startedAt));
  } catch (error) {
    return { deliveriesSeen: 0, redeliveriesAsked: 0, error: githubError(error, 'GET /app/hook/deliveries') };
  }
  let asked = 0;
  let error: string | null = null;
  for (const id of pickRedeliveries(deliveries)) {
    try {
      await deps.api.redeliver(id);
      asked += 1;
    } catch (failure) {
      error ??= githubError(failure, `POST /app/hook/deliveries/${id}/attempts`);
    }
  }
  if (error === null) await saveLastRun(deps.db, startedAt);
  return { deliveriesSeen: deliveries.length, redeliveriesAsked: asked, error };
}

export interface TargetsReconciled {
  targetsChecked: number;
  targetsResynced: number;
  error: string | null;
}

/**
 * Active targets whose organization owns their installation, with what they synced, what waits,
 * and the last ref a push named (for targets on every ref).
 */
function activeTargets(db: Db) {
  return db
    .selectFrom('github_connector_targets as t')
    .select(['t.id', 't.ref', 't.synced_sha', 't.pending_sha'])
    .select(
      sql<
        string | null
      >`(SELECT e.ref FROM github_sync_events e WHERE e.target_id = t.id AND e.ref IS NOT NULL ORDER BY e.created_at DESC LIMIT 1)`.as(
        'last_ref',
      ),
    )
    .where('t.status', '=', 'active')
    .where(
      sql<boolean>`EXISTS (SELECT 1 FROM github_installations i
      WHERE i.installation_id = t.installation_id AND i.organization_id = t.organization_id)`,
    )
    .orderBy('t.id')
    .execute();
}

/** Resyncs every active target whose branch head is neither synced nor waiting (a push we never got). */
export async function reconcileTargets(deps: ReconcileDeps): Promise<TargetsReconciled> {
  const result: TargetsReconciled = { targetsChecked: 0, targetsResynced: 0, error: null };
  for (const row of await activeTargets(deps.db)) {
    const branch = branchOf(row.ref, row.last_ref);
    const target = branch === undefined ? undefined : await getTarget(deps.db, row.id);
    if (!target || branch === undefined) continue;
    result.targetsChecked += 1;
    let head: string;
    try {
      head = await deps.api.branchHead(target.installationId, target.repository, branch);
    } catch (error) {
      result.error ??= githubError(error, `${target.repository} ${branch}`);
      continue;
    }
    if (!headDrifted(head, { syncedSha: row.synced_sha, pendingSha: row.pending_sha })) continue;
    await deps.resync(target, await recordResync(deps.db, target, 'reconcile', branch));
    result.targetsResynced += 1;
  }
  return result;
}
