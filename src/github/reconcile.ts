/**
 * The reconcile, so that nothing is lost while the service was down or refusing: GitHub's log of
 * the App's deliveries is read and each lost delivery asked for again (src/github/reconcile-deliveries.ts),
 * and every active target's branch head is compared with what it has synced, its known states
 * (branch gone, repository empty, access lost) recorded as it goes. GitHub's refusals come back
 * as the result's `error` (the next run tries again); Postgres failures throw, for the activity
 * to retry.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';
import { asGithubFailure, InstallationRefusedError, isGithubCallError, type GithubApi } from './api';
import { recordInstallationRefused } from './delivery-effects';
import { isRateLimited, classifyGithubFailure, type RateLimitKind } from './api-errors';
import { followedBranch, KnownStateError, readBranchHead } from './branch-heads';
import type { GithubTargetState } from './contract';
import { installationWait, recordRateLimit } from './installations';
import { headDrifted } from './reconcile-rules';
import { recordTargetState } from './sync-store';
import { getTarget, recordResync, type GithubTarget } from './target-records';

/** What became of one redelivery the reconcile decided (the worker's metric). */
export type RedeliveryMetric = 'asked' | 'asked_uncounted' | 'capped' | 'refused' | 'failed';

export interface ReconcileDeps {
  db: Db;
  api: GithubApi;
  now: () => number;
  limits: {
    /** Pages of the delivery log one run reads at most. */
    maxPages: number;
    /** Asks per GUID that count. */
    maxRedeliveries: number;
    /** Redeliveries one run asks for at most. */
    redeliveriesPerRun: number;
    /** Points a minute the App's routes may take, across every process. */
    pointsPerMinute: number;
  };
  /** The App whose budget the calls spend. */
  appId: string;
  /** Hands a recorded resync event to the target's workflow. */
  resync: (target: GithubTarget, eventId: string) => Promise<void>;
  onRedelivery?: (outcome: RedeliveryMetric) => void;
  onRateLimit?: (limit: RateLimitKind, waitMs: number) => void;
}

/** GitHub's answer in a line (status and message); anything that is not GitHub's is rethrown. */
export function githubError(error: unknown, what: string): string {
  if (!isGithubCallError(error)) throw error;
  const failure = asGithubFailure(error);
  return `${what}: ${failure.status ?? 'network'} ${failure.message}`.slice(0, 500);
}

export interface TargetsReconciled {
  targetsChecked: number;
  targetsResynced: number;
  targetStates?: GithubTargetState[];
  error: string | null;
}

/** Active targets whose organization owns their installation, with what they synced and what waits. */
function activeTargets(db: Db) {
  return db
    .selectFrom('github_connector_targets as t')
    .select(['t.id', 't.synced_sha', 't.pending_sha'])
    .where('t.status', '=', 'active')
    .where(
      sql<boolean>`EXISTS (SELECT 1 FROM github_installations i
      WHERE i.installation_id = t.installation_id AND i.organization_id = t.organization_id)`,
    )
    .orderBy('t.id')
    .execute();
}

/** A rate limit met reading a head: the installation waits (its other targets too), and is checked again next run. */
async function rateLimitedHead(deps: ReconcileDeps, target: GithubTarget, error: unknown): Promise<boolean> {
  if (!isGithubCallError(error) || !isRateLimited(asGithubFailure(error))) return false;
  const { strikes } = await installationWait(deps.db, target.installationId);
  const verdict = classifyGithubFailure(asGithubFailure(error), {
    attempt: 1,
    baseDelayMs: 0,
    nowMs: deps.now(),
    random: Math.random,
    rateLimitStrikes: strikes,
  });
  if (verdict.kind !== 'rate_limited') return false;
  const untilMs = await recordRateLimit(deps.db, target.installationId, verdict);
  deps.onRateLimit?.(verdict.limit, Math.max(0, untilMs - deps.now()));
  return true;
}

/** One target: its branch head against what it synced; a known state recorded (and reported), or cleared when the head is synced. */
async function reconcileTarget(
  deps: ReconcileDeps,
  target: GithubTarget & { heads: { synced_sha: string | null; pending_sha: string | null } },
  result: TargetsReconciled,
) {
  const row = target.heads;
  // Read again: an installation found suspended or gone earlier in this run took its targets with it.
  if (target.status !== 'active') return;
  if (target.ref !== null && !target.ref.startsWith('refs/heads/')) return;
  if ((await installationWait(deps.db, target.installationId)).untilMs > deps.now()) return;
  try {
    const { branch, head } = await readBranchHead(deps, target, await followedBranch(deps, target));
    result.targetsChecked += 1;
    if (!headDrifted(head, { syncedSha: row.synced_sha, pendingSha: row.pending_sha })) {
      if (head === row.synced_sha) await recordTargetState(deps.db, target.targetId, null);
      return;
    }
    await deps.resync(target, await recordResync(deps.db, { target, reason: 'reconcile', ref: branch }));
    result.targetsResynced += 1;
  } catch (error) {
    if (error instanceof InstallationRefusedError) {
      // Every target of the installation takes its state at once; this one is reported with it.
      await recordInstallationRefused(deps.db, { installationId: error.installationId, refusal: error.refusal });
      const state = error.refusal === 'suspend' ? 'installation_suspended' : 'installation_deleted';
      result.targetStates!.push({ targetId: target.targetId, repository: target.repository, state });
      return;
    }
    if (error instanceof KnownStateError) {
      result.targetsChecked += 1;
      await recordTargetState(deps.db, target.targetId, error.state);
      result.targetStates!.push({ targetId: target.targetId, repository: target.repository, state: error.state });
      return;
    }
    if (await rateLimitedHead(deps, target, error)) return;
    result.error ??= githubError(error, target.repository);
  }
}

/**
 * Resyncs every active target whose branch head is neither synced nor waiting (a push we never
 * got). A branch gone, an empty repository or lost access is the target's known state, reported
 * per target and not an error; a target whose installation GitHub rate-limits is left for the
 * next run.
 */
export async function reconcileTargets(deps: ReconcileDeps): Promise<TargetsReconciled> {
  const result: TargetsReconciled = { targetsChecked: 0, targetsResynced: 0, targetStates: [], error: null };
  for (const row of await activeTargets(deps.db)) {
    const target = await getTarget(deps.db, row.id);
    if (target) await reconcileTarget(deps, { ...target, heads: row }, result);
  }
  return result;
}
