/**
 * `installation_repositories` and `repository` deliveries that touch no target of any
 * organization are not sync work: the front door answers them 200 `no matching target` and
 * starts no workflow, once it has recorded itself what it keeps of them (the repositories an
 * installation made available or removed). Postgres is read directly, not through the push
 * resolver's cache (src/github/tenant.ts): these events are rare, and a target of any status
 * counts (a disabled one can come back, a renamed one takes its new name).
 */
import { AppError } from '../app/errors';
import type { Db } from '../app/store/db';
import type { GithubDeliveryInput } from './contract';
import { recordRepositories } from './delivery-effects';
import { sameRepository } from './target-records';

type Untracked = Extract<GithubDeliveryInput, { event: 'installation_repositories' | 'repository' }>;

/** Whether any target, of any organization and in any status, is of a repository the delivery names. */
async function touchesTarget(db: Db, input: Untracked): Promise<boolean> {
  const repositories =
    input.event === 'repository'
      ? [{ id: input.repository.id, names: [input.repository.fullName, ...input.previousFullNames] }]
      : input.repositories.map((r) => ({ id: r.id, names: [r.fullName] }));
  if (repositories.length === 0) return false;
  let query = db
    .selectFrom('github_connector_targets')
    .select('id')
    .where((eb) => eb.or(repositories.map((r) => sameRepository(r.id, r.names)(eb))));
  if (input.installationId !== null) query = query.where('installation_id', '=', String(input.installationId));
  return (await query.limit(1).executeTakeFirst()) !== undefined;
}

/**
 * True when the delivery touches no target and what it says was recorded: the route answers it
 * `no matching target`. False when it touches one, or when Postgres cannot tell: the delivery is
 * then accepted durably, and its workflow records it.
 */
export async function answeredUntracked(db: Db, input: Untracked): Promise<boolean> {
  try {
    if (await touchesTarget(db, input)) return false;
    if (input.event === 'installation_repositories') await recordRepositories(db, input);
    return true;
  } catch (error) {
    if (error instanceof AppError && error.dependency === 'postgres') return false;
    throw error;
  }
}
