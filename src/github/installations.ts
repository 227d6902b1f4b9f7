/**
 * Which organization owns each GitHub App installation (`github_installations`). Only the owner
 * connects targets on an installation, sees its sync work and is its deliveries' tenant. An
 * installation is bound by the App's install flow (src/github/routes/setup.ts) or by an operator
 * (`den github installations bind`); the `installation` webhook's `deleted` removes the binding.
 */
import { type Transaction, sql } from 'kysely';
import type { Db } from '../app/store/db';
import type { Database } from '../app/store/schema';
import type { GithubBindingSource } from './tables';

/** Reasons a target is disabled only for its installation's ownership; binding the installation to the target's organization clears them. */
const OWNERSHIP_REASONS = ['installation_unbound', 'installation_not_owned'];

export interface InstallationBinding {
  installationId: number;
  organizationId: string;
  account: string | null;
  boundVia: GithubBindingSource;
  boundAt: string;
  /** Targets of the owner on the installation. */
  targets: number;
}

export type BindOutcome =
  | { outcome: 'bound' | 'already_bound'; reenabled: number; disabled: number }
  | { outcome: 'owned_elsewhere'; ownerId: string }
  | { outcome: 'organization_not_found' };

/** The organization that owns the installation, if one does. */
export async function installationOwner(db: Db | Transaction<Database>, installationId: number): Promise<string | undefined> {
  const row = await db
    .selectFrom('github_installations')
    .select('organization_id')
    .where('installation_id', '=', String(installationId))
    .executeTakeFirst();
  return row?.organization_id;
}

/**
 * The owner's targets come back from an ownership-only disable; other organizations' live
 * targets on the installation are disabled (`installation_not_owned`), so nothing syncs an
 * installation for an organization that does not own it.
 */
async function applyOwnership(trx: Transaction<Database>, installationId: number, ownerId: string) {
  const reenabled = await trx
    .updateTable('github_connector_targets')
    .set({ status: 'active', status_reason: null, updated_at: sql`now()` })
    .where('installation_id', '=', String(installationId))
    .where('organization_id', '=', ownerId)
    .where('status', '=', 'disabled')
    .where('status_reason', 'in', OWNERSHIP_REASONS)
    .executeTakeFirst();
  const disabled = await trx
    .updateTable('github_connector_targets')
    .set({ status: 'disabled', status_reason: 'installation_not_owned', updated_at: sql`now()` })
    .where('installation_id', '=', String(installationId))
    .where('organization_id', '<>', ownerId)
    .where((eb) =>
      eb.or([eb('status', '=', 'active'), eb.and([eb('status', '=', 'disabled'), eb('status_reason', '=', 'installation_unbound')])]),
    )
    .executeTakeFirst();
  return { reenabled: Number(reenabled.numUpdatedRows), disabled: Number(disabled.numUpdatedRows) };
}

/**
 * Binds an installation to an organization. An installation another organization owns is never
 * taken, unless an operator asks to move it (`rebind`). Idempotent: binding it to its owner again
 * answers `already_bound`, and re-applies the owner's targets' statuses.
 */
export async function bindInstallation(
  db: Db,
  input: {
    installationId: number;
    organizationId: string;
    via: GithubBindingSource;
    memberId?: string;
    account?: string;
    rebind?: boolean;
  },
): Promise<BindOutcome> {
  return db.transaction().execute(async (trx) => {
    const org = await trx.selectFrom('organizations').select('id').where('id', '=', input.organizationId).executeTakeFirst();
    if (!org) return { outcome: 'organization_not_found' };
    const values = {
      organization_id: input.organizationId,
      account_login: input.account ?? null,
      bound_via: input.via,
      bound_by_member_id: input.memberId ?? null,
    };
    const inserted = await trx
      .insertInto('github_installations')
      .values({ installation_id: input.installationId, ...values })
      .onConflict((oc) => oc.column('installation_id').doNothing())
      .returning('installation_id')
      .executeTakeFirst();
    let outcome: 'bound' | 'already_bound' = 'bound';
    if (!inserted) {
      const existing = await trx
        .selectFrom('github_installations')
        .select('organization_id')
        .where('installation_id', '=', String(input.installationId))
        .forUpdate()
        .executeTakeFirstOrThrow();
      if (existing.organization_id === input.organizationId) outcome = 'already_bound';
      else if (!input.rebind) return { outcome: 'owned_elsewhere', ownerId: existing.organization_id };
      else {
        await trx
          .updateTable('github_installations')
          .set({ ...values, updated_at: sql`now()` })
          .where('installation_id', '=', String(input.installationId))
          .execute();
      }
    }
    return { outcome, ...(await applyOwnership(trx, input.installationId, input.organizationId)) };
  });
}

/** The installation is gone from GitHub: nobody owns it any more. */
export async function removeBinding(trx: Transaction<Database>, installationId: number): Promise<boolean> {
  const deleted = await trx.deleteFrom('github_installations').where('installation_id', '=', String(installationId)).executeTakeFirst();
  return Number(deleted.numDeletedRows) > 0;
}

/** Bound installations, of one organization or of all, oldest binding first, with their owner's target counts. */
export async function listInstallations(db: Db, organizationId?: string): Promise<InstallationBinding[]> {
  let query = db
    .selectFrom('github_installations as i')
    .select(['i.installation_id', 'i.organization_id', 'i.account_login', 'i.bound_via', 'i.updated_at'])
    .select(
      sql<number>`(SELECT count(*)::int FROM github_connector_targets t
        WHERE t.installation_id = i.installation_id AND t.organization_id = i.organization_id)`.as('targets'),
    )
    .orderBy('i.created_at', 'asc')
    .orderBy('i.installation_id', 'asc');
  if (organizationId !== undefined) query = query.where('i.organization_id', '=', organizationId);
  const rows = await query.execute();
  return rows.map((row) => ({
    installationId: Number(row.installation_id),
    organizationId: row.organization_id,
    account: row.account_login,
    boundVia: row.bound_via,
    boundAt: row.updated_at.toISOString(),
    targets: row.targets,
  }));
}

export interface UnboundInstallation {
  installationId: number;
  /** The organizations whose targets name it, with how many targets each has there. */
  claimedBy: { organizationId: string; targets: number }[];
}

/** Installations that targets name and nobody owns: contested at the migration, or deleted on GitHub since. */
export async function listUnboundInstallations(db: Db): Promise<UnboundInstallation[]> {
  const rows = await db
    .selectFrom('github_connector_targets as t')
    .select(['t.installation_id', 't.organization_id', sql<number>`count(*)::int`.as('targets')])
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('github_installations as i')
            .select(sql`1`.as('one'))
            .whereRef('i.installation_id', '=', 't.installation_id'),
        ),
      ),
    )
    .groupBy(['t.installation_id', 't.organization_id'])
    .orderBy('t.installation_id')
    .orderBy('t.organization_id')
    .execute();
  const byInstallation = new Map<number, UnboundInstallation>();
  for (const row of rows) {
    const installationId = Number(row.installation_id);
    const entry = byInstallation.get(installationId) ?? { installationId, claimedBy: [] };
    entry.claimedBy.push({ organizationId: row.organization_id, targets: row.targets });
    byInstallation.set(installationId, entry);
  }
  return [...byInstallation.values()];
}

/**
 * GitHub's rate limits are the installation's, not a target's: every target on it waits until
 * `rate_limited_until` (one installation, one budget). `rate_limit_strikes` counts limits without
 * a stated time in a row, each doubling the next wait (src/github/api-errors.ts).
 */
export interface InstallationWait {
  /** Epoch ms; 0 when GitHub never limited it. */
  untilMs: number;
  strikes: number;
}

export async function installationWait(db: Db, installationId: number): Promise<InstallationWait> {
  const row = await db
    .selectFrom('github_installations')
    .select(['rate_limited_until', 'rate_limit_strikes'])
    .where('installation_id', '=', String(installationId))
    .executeTakeFirst();
  return { untilMs: row?.rate_limited_until?.getTime() ?? 0, strikes: row?.rate_limit_strikes ?? 0 };
}

/** Records a limit: the wait only ever grows (a later limit of another target may name a later time). Answers the wait now recorded. */
export async function recordRateLimit(db: Db, installationId: number, limit: { untilMs: number; headerless: boolean }): Promise<number> {
  const row = await db
    .updateTable('github_installations')
    .set({
      rate_limited_until: sql`greatest(coalesce(rate_limited_until, to_timestamp(0)), ${new Date(limit.untilMs)})`,
      rate_limit_strikes: limit.headerless ? sql`rate_limit_strikes + 1` : sql`rate_limit_strikes`,
    })
    .where('installation_id', '=', String(installationId))
    .returning('rate_limited_until')
    .executeTakeFirst();
  return row?.rate_limited_until?.getTime() ?? limit.untilMs;
}

/** GitHub answered the installation again: the next limit without a stated time starts from the minimum wait. */
export async function clearRateLimitStrikes(db: Db, installationId: number): Promise<void> {
  await db
    .updateTable('github_installations')
    .set({ rate_limit_strikes: 0 })
    .where('installation_id', '=', String(installationId))
    .where('rate_limit_strikes', '>', 0)
    .execute();
}
