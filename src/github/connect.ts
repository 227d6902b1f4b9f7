/**
 * Connecting a repository as a target, as the admin route and `den github targets create` do it:
 * only on an installation the organization owns, and, with App credentials, only when the
 * installation's token can read the repository (`GET /repos/{owner}/{repo}`). Without App
 * credentials the target is recorded unverified, and its first sync checks the repository first.
 */
import type { Db } from '../app/store/db';
import { asGithubFailure, type GithubApi } from './api';
import { refusesAccess } from './api-errors';
import { installationOwner } from './installations';
import { createTarget } from './target-records';

export type RepositoryAccess =
  | { ok: true; id: number; fullName: string }
  | { ok: false; reason: 'not_accessible' }
  | { ok: false; reason: 'github_unavailable'; message: string };

/** Whether the installation's token reads the repository; anything but GitHub's HTTP answer is rethrown. */
async function repositoryAccess(api: GithubApi, installationId: number, repository: string): Promise<RepositoryAccess> {
  try {
    return { ok: true, ...(await api.repository({ installationId, repository })) };
  } catch (error) {
    if ((error as Error)?.name !== 'HttpError') throw error;
    const failure = asGithubFailure(error);
    if (refusesAccess(failure)) return { ok: false, reason: 'not_accessible' };
    return { ok: false, reason: 'github_unavailable', message: `${failure.status ?? 'network'} ${failure.message}`.slice(0, 300) };
  }
}

export type ConnectOutcome =
  | { ok: true; targetId: string; created: boolean; verified: boolean }
  | { ok: false; reason: 'organization_not_found' | 'installation_not_owned' | 'repository_not_accessible' }
  | { ok: false; reason: 'github_unavailable'; message: string };

export async function connectTarget(
  deps: { db: Db; api: GithubApi | undefined },
  input: { organizationId: string; installationId: number; repositoryFullName: string; repositoryId?: number; ref?: string },
): Promise<ConnectOutcome> {
  // Asked first, so GitHub is never called for an installation the organization does not own.
  if ((await installationOwner(deps.db, input.installationId)) !== input.organizationId) {
    const org = await deps.db.selectFrom('organizations').select('id').where('id', '=', input.organizationId).executeTakeFirst();
    return { ok: false, reason: org ? 'installation_not_owned' : 'organization_not_found' };
  }
  let verified = false;
  let { repositoryFullName, repositoryId } = input;
  if (deps.api) {
    const access = await repositoryAccess(deps.api, input.installationId, input.repositoryFullName);
    if (!access.ok) return access.reason === 'not_accessible' ? { ok: false, reason: 'repository_not_accessible' } : access;
    ({ fullName: repositoryFullName, id: repositoryId } = access);
    verified = true;
  }
  const created = await createTarget(deps.db, { ...input, repositoryFullName, repositoryId, verified });
  return created.ok ? { ...created, verified } : created;
}
