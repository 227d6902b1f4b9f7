/**
 * Connector targets as records: created (on an installation their organization owns,
 * src/github/installations.ts), read, resynced by request and deleted. A delivery's effects on
 * them are in src/github/delivery-effects.ts, and the admin route's listing of sync events in
 * src/github/sync-event-listing.ts.
 */
import { type Expression, type ExpressionBuilder, type SqlBool, sql } from 'kysely';
import { typeid } from 'typeid-js';
import type { Db } from '../app/store/db';
import type { Database } from '../app/store/schema';
import type { GithubTargetStatus } from './tables';

/** `owner/name`, as GitHub allows them. */
export const REPOSITORY_FULL_NAME = /^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/;

const newTargetId = () => typeid('ght').toString();
const newSyncEventId = () => typeid('gse').toString();

/** `main` → `refs/heads/main`; a full ref is kept as it is. */
function normalizeRef(ref: string): string {
  const trimmed = ref.trim();
  return trimmed.startsWith('refs/') ? trimmed : `refs/heads/${trimmed}`;
}

export interface GithubTarget {
  targetId: string;
  organizationId: string;
  installationId: number;
  repositoryId: number | null;
  repository: string;
  ref: string | null;
  /** The repository's default branch as last learnt (a target without a ref follows it). */
  defaultBranch: string | null;
  status: GithubTargetStatus;
  statusReason: string | null;
  /** Whether the installation was seen to reach the repository (at creation with App credentials, or by a sync). */
  repositoryVerified: boolean;
  /** Whether the target's organization owns its installation: only then does it get sync work. */
  installationOwned: boolean;
  createdAt: string;
  updatedAt: string;
}

export type TargetRow = {
  id: string;
  organization_id: string;
  installation_id: string;
  repository_id: string | null;
  repository_full_name: string;
  ref: string | null;
  default_branch: string | null;
  status: GithubTargetStatus;
  status_reason: string | null;
  repository_verified_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

type TargetsBuilder = ExpressionBuilder<Database, 'github_connector_targets'>;

/** Whether the target's organization owns the target's installation. */
export const ownsInstallation = (eb: TargetsBuilder) =>
  eb.exists(
    eb
      .selectFrom('github_installations as i')
      .select(sql`1`.as('one'))
      .whereRef('i.installation_id', '=', 'github_connector_targets.installation_id')
      .whereRef('i.organization_id', '=', 'github_connector_targets.organization_id'),
  );

/**
 * Targets of one repository: by the stored repository id first; a target created from a full
 * name only (no id yet) matches on the name, case-insensitively like GitHub.
 */
export function sameRepository(repositoryId: number, fullNames: string[]) {
  const names = [...new Set(fullNames.map((n) => n.toLowerCase()))];
  return (eb: TargetsBuilder): Expression<SqlBool> =>
    eb.or([
      eb('repository_id', '=', String(repositoryId)),
      eb.and([eb('repository_id', 'is', null), eb(sql<string>`lower(repository_full_name)`, 'in', names)]),
    ]);
}

// GitHub ids are below 2^53, so int8 strings convert to numbers without loss.
const toTarget = (row: TargetRow & { owned: SqlBool }): GithubTarget => ({
  targetId: row.id,
  organizationId: row.organization_id,
  installationId: Number(row.installation_id),
  repositoryId: row.repository_id === null ? null : Number(row.repository_id),
  repository: row.repository_full_name,
  ref: row.ref,
  defaultBranch: row.default_branch,
  status: row.status,
  statusReason: row.status_reason,
  repositoryVerified: row.repository_verified_at !== null,
  installationOwned: row.owned === true,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

/** Targets with whether their organization owns their installation. */
const selectTargets = (db: Db) =>
  db
    .selectFrom('github_connector_targets')
    .selectAll()
    .select((eb) => ownsInstallation(eb).as('owned'));

export type CreateTargetResult =
  { ok: true; targetId: string; created: boolean } | { ok: false; reason: 'organization_not_found' | 'installation_not_owned' };

/**
 * Creates a target, or returns the identical one that already exists (same organization,
 * installation, repository and ref), so a repeated command doesn't double the sync work. Refused
 * when the organization does not exist or does not own the installation (checked in the same
 * transaction, so a binding removed meanwhile cannot slip through). `verified`: the caller saw
 * the installation reach the repository; otherwise the first sync checks it.
 */
export async function createTarget(
  db: Db,
  input: {
    organizationId: string;
    installationId: number;
    repositoryFullName: string;
    repositoryId?: number;
    ref?: string;
    verified?: boolean;
  },
): Promise<CreateTargetResult> {
  const ref = input.ref === undefined ? null : normalizeRef(input.ref);
  return db.transaction().execute(async (trx) => {
    const org = await trx.selectFrom('organizations').select('id').where('id', '=', input.organizationId).forUpdate().executeTakeFirst();
    if (!org) return { ok: false, reason: 'organization_not_found' };
    const owner = await trx
      .selectFrom('github_installations')
      .select('organization_id')
      .where('installation_id', '=', String(input.installationId))
      .forShare()
      .executeTakeFirst();
    if (owner?.organization_id !== input.organizationId) return { ok: false, reason: 'installation_not_owned' };
    const existing = await trx
      .selectFrom('github_connector_targets')
      .select('id')
      .where('organization_id', '=', input.organizationId)
      .where('installation_id', '=', String(input.installationId))
      .where(sql<string>`lower(repository_full_name)`, '=', input.repositoryFullName.toLowerCase())
      .where((eb) => (ref === null ? eb('ref', 'is', null) : eb('ref', '=', ref)))
      .executeTakeFirst();
    if (existing) return { ok: true, targetId: existing.id, created: false };
    const targetId = newTargetId();
    await trx
      .insertInto('github_connector_targets')
      .values({
        id: targetId,
        organization_id: input.organizationId,
        installation_id: input.installationId,
        repository_id: input.repositoryId ?? null,
        repository_full_name: input.repositoryFullName,
        ref,
        status: 'active',
        repository_verified_at: input.verified ? sql`now()` : null,
      })
      .execute();
    return { ok: true, targetId, created: true };
  });
}

export async function listTargets(db: Db, organizationId: string): Promise<GithubTarget[]> {
  const rows = await selectTargets(db)
    .where('organization_id', '=', organizationId)
    .orderBy('created_at', 'asc')
    .orderBy('id', 'asc')
    .execute();
  return rows.map(toTarget);
}

export async function getTarget(db: Db, targetId: string): Promise<GithubTarget | undefined> {
  const row = await selectTargets(db).where('id', '=', targetId).executeTakeFirst();
  return row && toTarget(row);
}

/** A target of `organizationId`, or undefined (another organization's is as absent as a missing one). */
export async function findTarget(db: Db, organizationId: string, targetId: string): Promise<GithubTarget | undefined> {
  const target = await getTarget(db, targetId);
  return target?.organizationId === organizationId ? target : undefined;
}

/**
 * A forced full resync, recorded as a queued event of the target (its own delivery id:
 * `manual-…` or `reconcile-…`), on `ref` (the target's own, else the branch the reconcile read;
 * the sync itself reads the branch the target follows).
 */
export async function recordResync(
  db: Db,
  resync: { target: GithubTarget; reason: 'manual' | 'reconcile'; ref?: string | null },
): Promise<string> {
  const { target, reason, ref = target.ref } = resync;
  const id = newSyncEventId();
  await db
    .insertInto('github_sync_events')
    .values({
      id,
      organization_id: target.organizationId,
      delivery_id: `${reason}-${id}`,
      event: reason,
      action: null,
      kind: 'full_resync',
      target_id: target.targetId,
      installation_id: target.installationId,
      repository_id: target.repositoryId,
      repository_full_name: target.repository,
      ref,
      head_sha: null,
      status: 'queued',
      outcome: null,
    })
    .execute();
  return id;
}

export async function deleteTarget(db: Db, organizationId: string, targetId: string): Promise<boolean> {
  const deleted = await db
    .deleteFrom('github_connector_targets')
    .where('id', '=', targetId)
    .where('organization_id', '=', organizationId)
    .executeTakeFirst();
  return Number(deleted.numDeletedRows) > 0;
}
