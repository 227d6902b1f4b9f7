/**
 * One attempt of a target sync, as the target workflow's activity runs it: read the branch head
 * from GitHub (never a delivery's `after`: deliveries race), read the tree at it, pick the
 * manifests, fetch only the blobs the snapshot lacks, and commit the snapshot and the events.
 * A GitHub failure comes back as a result (retry after a delay, or final), never a throw, so
 * the workflow decides what to wait; Postgres failures throw and the activity is retried.
 */
import type { Db } from '../app/store/db';
import { asGithubFailure, type GithubApi } from './api';
import { classifyGithubFailure, refusesAccess } from './api-errors';
import type { GithubSyncAttempt, GithubSyncRequest } from './contract';
import { countChanges, pickManifests, planSync, validateManifest, type SyncPlan } from './manifests';
import type { GithubSettings } from './settings';
import { loadSnapshot, recordFailure, recordRetry, recordSync, recordVerified, startAttempt, type FetchedFile } from './sync-store';
import { getTarget, type GithubTarget } from './target-records';

export interface SyncDeps {
  db: Db;
  /** Undefined without App credentials. */
  api: GithubApi | undefined;
  sync: GithubSettings['sync'];
  now: () => number;
  random: () => number;
}

/** Why a target cannot be synced at all, if it cannot. */
function refusal(target: GithubTarget | undefined, branch: string | null): { code: string; message: string } | undefined {
  if (!target) return { code: 'target_deleted', message: 'the target no longer exists' };
  if (target.status !== 'active') return { code: 'target_inactive', message: `the target is ${target.status}` };
  if (!target.installationOwned)
    return { code: 'installation_unbound', message: "the target's organization does not own its installation" };
  if (branch === null || !branch.startsWith('refs/heads/'))
    return { code: 'unsupported_ref', message: `not a branch: ${branch ?? 'none'}` };
  return undefined;
}

async function fetchPlanned(api: GithubApi, target: GithubTarget, plan: SyncPlan): Promise<FetchedFile[]> {
  const fetched: FetchedFile[] = [];
  for (const blob of plan.fetch) {
    const content = await api.blob(target.installationId, target.repository, blob.sha);
    const verdict = validateManifest(blob.path, content);
    fetched.push({ blob, content, status: verdict.status, error: verdict.status === 'invalid' ? verdict.error : null });
  }
  return fetched;
}

async function readAndRecord(
  deps: SyncDeps & { api: GithubApi },
  target: GithubTarget,
  branch: string,
  request: GithubSyncRequest,
  eventIds: string[],
) {
  const { api } = deps;
  const headSha = await api.branchHead(target.installationId, target.repository, branch);
  const picked = pickManifests(await api.tree(target.installationId, target.repository, headSha), deps.sync.paths);
  const snapshot = await loadSnapshot(deps.db, target.targetId);
  const plan = planSync(picked, snapshot, { maxFiles: deps.sync.maxFiles, maxFileBytes: deps.sync.maxFileBytes, full: request.full });
  const fetched = await fetchPlanned(api, target, plan);
  const counts = countChanges(plan, snapshot, fetched);
  const status = counts.invalid > 0 ? ('partial' as const) : ('completed' as const);
  const attempts = await recordSync(deps.db, { targetId: target.targetId, eventIds, plan, fetched, outcome: { headSha, status, counts } });
  return { outcome: 'synced' as const, status, headSha, counts, attempts };
}

/**
 * A target recorded without App credentials is checked once, before its first sync reads
 * anything: GitHub's refusal (404, or a 403 that is not a rate limit) means the installation
 * cannot read the repository. Other failures are thrown, for the caller to classify.
 */
async function verifyRepository(api: GithubApi, db: Db, target: GithubTarget): Promise<boolean> {
  try {
    const repository = await api.repository(target.installationId, target.repository);
    await recordVerified(db, target.targetId, repository.id);
    return true;
  } catch (error) {
    if ((error as Error)?.name === 'HttpError' && refusesAccess(asGithubFailure(error))) return false;
    throw error;
  }
}

const NOT_ACCESSIBLE = { code: 'repository_not_accessible', message: 'the installation cannot read the repository' };

export async function runSyncAttempt(deps: SyncDeps, request: GithubSyncRequest): Promise<GithubSyncAttempt> {
  if (!deps.api) return { outcome: 'not_configured' };
  const events = await startAttempt(deps.db, request.targetId, request.eventIds);
  const eventIds = events.map((e) => e.id);
  if (eventIds.length === 0) return { outcome: 'nothing_open' };
  const target = await getTarget(deps.db, request.targetId);
  const branch = target?.ref ?? events.findLast((e) => e.ref !== null)?.ref ?? null;
  const refused = refusal(target, branch);
  if (refused) return { outcome: 'failed', ...refused, attempts: await recordFailure(deps.db, request.targetId, eventIds, refused) };
  try {
    if (!target!.repositoryVerified && !(await verifyRepository(deps.api, deps.db, target!))) {
      const attempts = await recordFailure(deps.db, request.targetId, eventIds, NOT_ACCESSIBLE, 'not_accessible');
      return { outcome: 'failed', ...NOT_ACCESSIBLE, attempts };
    }
    return await readAndRecord({ ...deps, api: deps.api }, target!, branch!, request, eventIds);
  } catch (error) {
    // Only the REST client's errors are GitHub's; anything else (Postgres) is the activity's to retry.
    if ((error as Error)?.name !== 'HttpError') throw error;
    const failure = asGithubFailure(error);
    const verdict = classifyGithubFailure(failure, {
      attempt: request.attempt,
      baseDelayMs: deps.sync.retryDelayMs,
      nowMs: deps.now(),
      random: deps.random,
    });
    const detail = { code: verdict.code, message: verdict.message };
    if (verdict.retryable && request.attempt < deps.sync.maxAttempts) {
      await recordRetry(deps.db, eventIds, detail);
      return { outcome: 'retry', ...detail, delayMs: verdict.delayMs };
    }
    return { outcome: 'failed', ...detail, attempts: await recordFailure(deps.db, request.targetId, eventIds, detail) };
  }
}
