/**
 * One attempt of a target sync, as the target workflow's activity runs it: read the branch head
 * from GitHub (never a delivery's `after`: deliveries race), decide which of the batch's heads it
 * supersedes, walk the tree within its bound, pick the manifests (following symbolic links within
 * the repository, listing submodules: src/github/links.ts), fetch only the blobs the snapshot
 * lacks, and commit the snapshot and the events.
 *
 * Every failure is classified. GitHub's come back as results: a rate limit is a wait on the
 * workflow's timer (shared by the installation's targets, not an attempt), a network error or a
 * 5xx a retry after a delay, anything else final; a missing branch, an empty repository or lost
 * access a known state the target shows; a token refused because the installation is suspended or
 * gone, that state for every target of the installation. A file's content problem (binary, a NUL byte) is that
 * file's `skipped`. Postgres failures throw, for the activity to retry; anything else ends the
 * sync `failed` (`sync_error`) at once.
 */
import { DatabaseError } from 'pg';
import { AppError } from '../app/errors';
import type { Db } from '../app/store/db';
import { asGithubFailure, InstallationRefusedError, isGithubCallError, rethrowRefusal, type GithubApi } from './api';
import { classifyGithubFailure, refusesAccess, type RateLimitKind } from './api-errors';
import { followedBranch, KnownStateError, readBranchHead } from './branch-heads';
import { GITHUB_SYNC_PROTOCOL, type GithubSyncAttempt, type GithubSyncRequest } from './contract';
import { clearRateLimitStrikes, installationWait, recordRateLimit } from './installations';
import { countChanges, decodeBlob, directoryFilter, pickManifests, planSync, validateManifest, type SyncPlan } from './manifests';
import type { GithubSettings } from './settings';
import {
  loadSnapshot,
  openEvents,
  recordFailure,
  recordRateLimited,
  recordRetry,
  recordSync,
  recordVerified,
  startAttempt,
  type FetchedFile,
  type HeadDecisions,
} from './sync-store';
import { getTarget, type GithubTarget } from './target-records';
import { keptTree } from './links';
import { recordInstallationRefused } from './delivery-effects';

export interface SyncDeps {
  db: Db;
  /** Undefined without App credentials. */
  api: GithubApi | undefined;
  sync: GithubSettings['sync'];
  now: () => number;
  random: () => number;
  /** Told of each rate limit GitHub answered, with the wait it set (the worker's metrics). */
  onRateLimit?: (limit: RateLimitKind, waitMs: number) => void;
  /** Told of a failure that is neither GitHub's nor Postgres's (a fault of ours), before the sync ends `failed`. */
  onFault?: (error: unknown) => void;
}

type Event = { id: string; headSha: string | null; ref: string | null };
type Deps = SyncDeps & { api: GithubApi };
/** One attempt's batch: what was asked, of which target, and its open events. */
type Attempt = { request: GithubSyncRequest; target: GithubTarget; eventIds: string[] };

/** Distinct heads compared with the synced one per sync, at most; past it a head counts as not known to be older. */
const MAX_COMPARES = 10;

/** Why a target cannot be synced at all, if it cannot. */
function refusal(target: GithubTarget | undefined): { code: string; message: string } | undefined {
  if (!target) return { code: 'target_deleted', message: 'the target no longer exists' };
  if (target.status !== 'active') return { code: 'target_inactive', message: `the target is ${target.status}` };
  if (!target.installationOwned)
    return { code: 'installation_unbound', message: "the target's organization does not own its installation" };
  if (target.ref !== null && !target.ref.startsWith('refs/heads/'))
    return { code: 'unsupported_ref', message: `not a branch: ${target.ref}` };
  return undefined;
}

/** The planned blobs; one that is not text Postgres can store, or that GitHub no longer serves, is that file's `skipped`. */
async function fetchPlanned(api: GithubApi, target: GithubTarget, plan: SyncPlan): Promise<FetchedFile[]> {
  const fetched: FetchedFile[] = [];
  for (const blob of plan.fetch) {
    let bytes: Buffer;
    try {
      bytes = await api.blob(target, blob.sha);
    } catch (error) {
      rethrowRefusal(error);
      const status = (error as Error)?.name === 'HttpError' ? asGithubFailure(error).status : undefined;
      if (status !== 404 && status !== 422) throw error;
      fetched.push({ blob, content: null, status: 'skipped', error: `github_${status}` });
      continue;
    }
    const decoded = decodeBlob(bytes);
    if (!decoded.ok) {
      fetched.push({ blob, content: null, status: 'skipped', error: decoded.reason });
      continue;
    }
    const verdict = validateManifest(blob.path, decoded.text);
    fetched.push({ blob, content: decoded.text, status: verdict.status, error: verdict.status === 'invalid' ? verdict.error : null });
  }
  return fetched;
}

/** GitHub's ancestry, with a commit it no longer knows (force-pushed away and collected) as not an ancestor. */
async function ancestry(deps: Deps, target: GithubTarget, shas: { base: string; head: string }) {
  try {
    return await deps.api.compare(target, shas);
  } catch (error) {
    rethrowRefusal(error);
    if ((error as Error)?.name === 'HttpError' && asGithubFailure(error).status === 404) return 'diverged';
    throw error;
  }
}

/**
 * Which events of the batch the read head supersedes. Only a head it descends from (GitHub's
 * compare); for any other, the ref is read again: still the same, the branch really is there (a
 * force-push, or moved back) and the others are superseded; moved, the newer head is synced, and
 * the events not known to be older are reopened for the next sync. A workflow from before this
 * rule (no protocol) supersedes every other head, as it did.
 */
async function decideHeads(deps: Deps, target: GithubTarget, read: { branch: string; head: string; events: Event[]; protocol: boolean }) {
  const { branch, head, events, protocol } = read;
  const differing = (sha: string) => events.filter((e) => e.headSha !== null && e.headSha !== sha);
  const others = [...new Set(differing(head).map((e) => e.headSha!))];
  const none: HeadDecisions = { superseded: [], reopened: [] };
  if (!protocol) return { head, decisions: { ...none, superseded: differing(head).map((e) => e.id) } };
  if (others.length === 0) return { head, decisions: none };
  const older = new Set<string>();
  for (const sha of others.slice(0, MAX_COMPARES)) if ((await ancestry(deps, target, { base: sha, head })) === 'ahead') older.add(sha);
  if (older.size === others.length) return { head, decisions: { ...none, superseded: differing(head).map((e) => e.id) } };
  const reread = await deps.api.branchHead(target, branch);
  if (reread === head) return { head, decisions: { ...none, superseded: differing(head).map((e) => e.id) } };
  if ((await ancestry(deps, target, { base: head, head: reread })) === 'ahead') older.add(head);
  const rest = differing(reread);
  return {
    head: reread,
    decisions: {
      superseded: rest.filter((e) => older.has(e.headSha!)).map((e) => e.id),
      reopened: rest.filter((e) => !older.has(e.headSha!)).map((e) => e.id),
    },
  };
}

/** The tree walk's bound, as the events and the target's last sync show it. */
function treeTooLarge(requests: number, unread: string[]): { code: string; message: string } {
  const named = unread.slice(0, 5).map((dir) => (dir === '' ? '/' : dir));
  const more = unread.length > named.length ? ` and ${unread.length - named.length} more` : '';
  return { code: 'tree_too_large', message: `read ${requests} trees, the bound; not read: ${named.join(', ')}${more}` };
}

async function readAndRecord(
  deps: Deps,
  target: GithubTarget,
  batch: { request: GithubSyncRequest; events: Event[] },
): Promise<GithubSyncAttempt> {
  const { request, events } = batch;
  const { api, db } = deps;
  const read = await readBranchHead(deps, target, await followedBranch(deps, target));
  const protocol = request.protocol === GITHUB_SYNC_PROTOCOL;
  const { head: headSha, decisions } = await decideHeads(deps, target, { ...read, events, protocol });
  const walk = { canHold: directoryFilter(deps.sync.paths), maxRequests: deps.sync.maxTreeRequests };
  const tree = await api.tree(target, headSha, walk);
  const kept = await keptTree(tree, {
    globs: deps.sync.paths,
    readLink: async (sha) => (await api.blob(target, sha)).toString('utf8'),
    maxLinkReads: deps.sync.maxFiles,
  });
  const picked = pickManifests(kept.files, deps.sync.paths);
  const snapshot = await loadSnapshot(db, target.targetId);
  const bounds = {
    maxFiles: deps.sync.maxFiles,
    maxFileBytes: deps.sync.maxFileBytes,
    full: request.full,
    unread: tree.unread,
    skipped: kept.skipped,
  };
  const plan = planSync(picked, snapshot, bounds);
  const fetched = await fetchPlanned(api, target, plan);
  const counts = countChanges(plan, snapshot, fetched);
  const error = tree.unread.length > 0 ? treeTooLarge(tree.requests, tree.unread) : null;
  const status = counts.invalid > 0 || error !== null ? ('partial' as const) : ('completed' as const);
  await clearRateLimitStrikes(db, target.installationId);
  const eventIds = events.map((e) => e.id);
  const attempts = await recordSync(db, {
    targetId: target.targetId,
    eventIds,
    plan,
    fetched,
    outcome: { headSha, status, counts, error },
    decisions,
  });
  return { outcome: 'synced', status, headSha, counts, attempts, error, reopened: decisions.reopened };
}

/**
 * A target recorded without App credentials is checked once, before its first sync reads
 * anything: GitHub's refusal (404, or a 403 that is not a rate limit) means the installation
 * cannot read the repository. Other failures are thrown, for the caller to classify.
 */
async function verifyRepository(api: GithubApi, db: Db, target: GithubTarget): Promise<boolean> {
  try {
    const repository = await api.repository(target);
    await recordVerified(db, target.targetId, repository.id);
    return true;
  } catch (error) {
    rethrowRefusal(error);
    if ((error as Error)?.name === 'HttpError' && refusesAccess(asGithubFailure(error))) return false;
    throw error;
  }
}

/** A batch's code when GitHub refused its installation a token, as the targets' status reason says it. */
const INSTALLATION_REFUSED = { suspend: 'installation_suspended', deleted: 'installation_deleted' } as const;

const NOT_ACCESSIBLE = { code: 'repository_not_accessible', message: 'the installation cannot read the repository' };

/** Postgres could not take a write or a read: the activity is retried. */
function isPostgresError(error: unknown): boolean {
  return (error instanceof AppError && error.dependency === 'postgres') || error instanceof DatabaseError;
}

/** The installation's wait, when GitHub still rate-limits it: the workflow waits on a timer (re-reading it every GITHUB_RATE_LIMIT_RECHECK). */
function waitFor(deps: SyncDeps, untilMs: number): GithubSyncAttempt {
  return { outcome: 'rate_limited', untilMs, waitMs: Math.max(1, Math.min(untilMs - deps.now(), deps.sync.rateLimitRecheckMs)) };
}

/** A GitHub failure of the attempt, classified: a wait, a retry, or the end of the sync. */
async function githubFailure(deps: Deps, attempt: Attempt, error: unknown) {
  const { request, target, eventIds } = attempt;
  const failure = asGithubFailure(error);
  const { strikes } = await installationWait(deps.db, target.installationId);
  const context = {
    attempt: request.attempt,
    baseDelayMs: deps.sync.retryDelayMs,
    nowMs: deps.now(),
    random: deps.random,
    rateLimitStrikes: strikes,
  };
  const verdict = classifyGithubFailure(failure, context);
  const detail = { code: verdict.code, message: verdict.message };
  if (verdict.kind === 'rate_limited') {
    const untilMs = await recordRateLimit(deps.db, target.installationId, verdict);
    deps.onRateLimit?.(verdict.limit, Math.max(0, untilMs - deps.now()));
    if (request.protocol === GITHUB_SYNC_PROTOCOL) {
      await recordRateLimited(deps.db, eventIds, detail);
      return waitFor(deps, untilMs);
    }
  }
  if (verdict.kind !== 'final' && request.attempt < deps.sync.maxAttempts) {
    await recordRetry(deps.db, eventIds, detail);
    const delayMs = verdict.kind === 'retry' ? verdict.delayMs : Math.min(5 * 60_000, Math.max(1, verdict.untilMs - deps.now()));
    return { outcome: 'retry' as const, ...detail, delayMs };
  }
  return {
    outcome: 'failed' as const,
    ...detail,
    attempts: await recordFailure(deps.db, { targetId: target.targetId, eventIds, error: detail }),
  };
}

/** Every failure of an attempt ends in a recorded result, except Postgres's, which the activity retries. */
async function classifyFailure(deps: Deps, attempt: Attempt, error: unknown) {
  const { target, eventIds } = attempt;
  if (error instanceof InstallationRefusedError) {
    // The installation's state, for all its targets at once; this batch ends with it.
    await recordInstallationRefused(deps.db, { installationId: error.installationId, refusal: error.refusal });
    const detail = {
      code: INSTALLATION_REFUSED[error.refusal],
      message: `GitHub refused the installation a token: ${error.status} ${error.message}`.slice(0, 300),
    };
    return {
      outcome: 'failed' as const,
      ...detail,
      attempts: await recordFailure(deps.db, { targetId: target.targetId, eventIds, error: detail }),
    };
  }
  if (error instanceof KnownStateError) {
    const detail = { code: error.state, message: error.message.slice(0, 300) };
    return {
      outcome: 'failed' as const,
      ...detail,
      attempts: await recordFailure(deps.db, { targetId: target.targetId, eventIds, error: detail, target: { state: error.state } }),
    };
  }
  if (isGithubCallError(error)) return githubFailure(deps, attempt, error);
  if (isPostgresError(error)) throw error;
  deps.onFault?.(error);
  const detail = {
    code: 'sync_error',
    message: String((error as Error)?.message ?? error)
      .replace(/\u0000/g, '')
      .slice(0, 300),
  };
  return {
    outcome: 'failed' as const,
    ...detail,
    attempts: await recordFailure(deps.db, { targetId: target.targetId, eventIds, error: detail }),
  };
}

/** Before an attempt is counted: a batch already ended, or an installation GitHub still rate-limits (for a workflow that waits). */
async function beforeAttempt(
  deps: SyncDeps,
  request: GithubSyncRequest,
  target: GithubTarget | undefined,
): Promise<GithubSyncAttempt | undefined> {
  if (request.protocol !== GITHUB_SYNC_PROTOCOL || !target) return undefined;
  if ((await openEvents(deps.db, request.targetId, request.eventIds)).length === 0) return { outcome: 'nothing_open' };
  const { untilMs } = await installationWait(deps.db, target.installationId);
  return untilMs > deps.now() ? waitFor(deps, untilMs) : undefined;
}

export async function runSyncAttempt(deps: SyncDeps, request: GithubSyncRequest): Promise<GithubSyncAttempt> {
  if (!deps.api) return { outcome: 'not_configured' };
  const withApi = { ...deps, api: deps.api };
  const target = await getTarget(deps.db, request.targetId);
  const early = await beforeAttempt(deps, request, target);
  if (early) return early;
  const events = await startAttempt(deps.db, request.targetId, request.eventIds);
  const eventIds = events.map((e) => e.id);
  if (eventIds.length === 0) return { outcome: 'nothing_open' };
  const refused = refusal(target);
  if (refused)
    return {
      outcome: 'failed',
      ...refused,
      attempts: await recordFailure(deps.db, { targetId: request.targetId, eventIds, error: refused }),
    };
  try {
    if (!target!.repositoryVerified && !(await verifyRepository(deps.api, deps.db, target!))) {
      const failure = { targetId: request.targetId, eventIds, error: NOT_ACCESSIBLE, target: { disable: 'not_accessible' } };
      const attempts = await recordFailure(deps.db, failure);
      return { outcome: 'failed', ...NOT_ACCESSIBLE, attempts };
    }
    return await readAndRecord(withApi, target!, { request, events });
  } catch (error) {
    return classifyFailure(withApi, { request, target: target!, eventIds }, error);
  }
}
