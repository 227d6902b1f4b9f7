/**
 * The branch a target follows and its head, as the sync and the reconcile read them. A target
 * with a ref follows that branch; one without follows the repository's default branch (learnt
 * from a push, else from the repository API, and read again when it 404s: a renamed default
 * branch). GitHub's 404 for the branch, 409 for an empty repository and 404 for the repository
 * itself become known states (src/github/sync-store.ts KNOWN_STATES) rather than errors; a token
 * GitHub refused the installation is not the repository's state, and is rethrown as it is.
 */
import type { Db } from '../app/store/db';
import { asGithubFailure, rethrowRefusal, type GithubApi } from './api';
import { refusesAccess } from './api-errors';
import { recordDefaultBranch, type KnownState } from './sync-store';
import type { GithubTarget } from './target-records';

/** A branch in a state the target shows as its `statusReason` while it stays active. */
export class KnownStateError extends Error {
  constructor(
    readonly state: KnownState,
    message: string,
  ) {
    super(message);
    this.name = 'KnownStateError';
  }
}

const statusOf = (error: unknown): number | undefined =>
  (error as Error)?.name === 'HttpError' ? asGithubFailure(error).status : undefined;

/** What reading a branch needs: GitHub, and Postgres to keep the default branch learnt. */
export interface Github {
  api: GithubApi;
  db: Db;
}

/** The repository's default branch as the installation sees it; a refusal is `not_accessible`. */
async function defaultBranch({ api, db }: Github, target: GithubTarget): Promise<string> {
  let repository;
  try {
    repository = await api.repository(target);
  } catch (error) {
    rethrowRefusal(error);
    if ((error as Error)?.name === 'HttpError' && refusesAccess(asGithubFailure(error))) {
      throw new KnownStateError('not_accessible', `the installation cannot read ${target.repository}`);
    }
    throw error;
  }
  if (repository.defaultBranch === null) throw new KnownStateError('empty_repository', `${target.repository} has no default branch`);
  await recordDefaultBranch(db, target.targetId, repository.defaultBranch);
  return `refs/heads/${repository.defaultBranch}`;
}

/** The branch the target follows now: its ref, else the default branch it knows, else the repository's. */
export async function followedBranch(github: Github, target: GithubTarget): Promise<string> {
  if (target.ref !== null) return target.ref;
  if (target.defaultBranch !== null) return `refs/heads/${target.defaultBranch}`;
  return defaultBranch(github, target);
}

/**
 * The branch's head. A 409 is an empty repository; a 404 is a missing branch, unless the
 * repository itself cannot be read (`not_accessible`) or, for a target without a ref, the default
 * branch was renamed (then the new one's head).
 */
export async function readBranchHead(github: Github, target: GithubTarget, branch: string): Promise<{ branch: string; head: string }> {
  const { api } = github;
  try {
    return { branch, head: await api.branchHead(target, branch) };
  } catch (error) {
    rethrowRefusal(error);
    const status = statusOf(error);
    if (status === 409) throw new KnownStateError('empty_repository', `${target.repository} has no commit yet`);
    if (status !== 404) throw error;
  }
  const current = await defaultBranch(github, target);
  if (target.ref === null && current !== branch) return readBranchHead(github, { ...target, defaultBranch: current.slice(11) }, current);
  throw new KnownStateError('ref_missing', `${target.repository} has no branch ${branch.replace(/^refs\/heads\//, '')}`);
}
