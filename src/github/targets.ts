/**
 * Connector targets and sync events: the GitHub tables (migration 0004). The CLI and the admin
 * route create targets (on an installation their organization owns, src/github/installations.ts),
 * the delivery workflow's activities apply a delivery's effects, and the admin route lists sync
 * events. Every effect is one transaction and idempotent, because activities retry. Only a target
 * whose installation its organization owns is given sync work.
 */
import { type Expression, type ExpressionBuilder, type SqlBool, type Transaction, sql } from 'kysely';
import { typeid } from 'typeid-js';
import type { Db } from '../app/store/db';
import type { Database } from '../app/store/schema';
import type { GithubSyncKind, GithubSyncStatus, GithubTargetStatus } from './tables';
import type { GithubDeliveryInput, GithubRepositoryRef, GithubSyncEventRecord, GithubTargetChange } from './contract';
import { removeBinding } from './installations';

export const SYNC_STATUSES: GithubSyncStatus[] = ['queued', 'running', 'completed', 'partial', 'skipped', 'failed', 'superseded'];

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
  status: GithubTargetStatus;
  statusReason: string | null;
  /** Whether the installation was seen to reach the repository (at creation with App credentials, or by a sync). */
  repositoryVerified: boolean;
  /** Whether the target's organization owns its installation: only then does it get sync work. */
  installationOwned: boolean;
  createdAt: string;
  updatedAt: string;
}

type TargetRow = {
  id: string;
  organization_id: string;
  installation_id: string;
  repository_id: string | null;
  repository_full_name: string;
  ref: string | null;
  status: GithubTargetStatus;
  status_reason: string | null;
  repository_verified_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

type TargetsBuilder = ExpressionBuilder<Database, 'github_connector_targets'>;

/** Whether the target's organization owns the target's installation. */
const ownsInstallation = (eb: TargetsBuilder) =>
  eb.exists(
    eb
      .selectFrom('github_installations as i')
      .select(sql`1`.as('one'))
      .whereRef('i.installation_id', '=', 'github_connector_targets.installation_id')
      .whereRef('i.organization_id', '=', 'github_connector_targets.organization_id'),
  );

// GitHub ids are below 2^53, so int8 strings convert to numbers without loss.
const toTarget = (row: TargetRow & { owned: SqlBool }): GithubTarget => ({
  targetId: row.id,
  organizationId: row.organization_id,
  installationId: Number(row.installation_id),
  repositoryId: row.repository_id === null ? null : Number(row.repository_id),
  repository: row.repository_full_name,
  ref: row.ref,
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

// ---------------------------------------------------------------------------------------
// Delivery effects (the activities of the delivery workflow, workflows/github.ts).

export interface DeliveryEffects {
  syncEvents: GithubSyncEventRecord[];
  targetChanges: GithubTargetChange[];
  repositoriesRecorded: number;
}

const noEffects = (): DeliveryEffects => ({ syncEvents: [], targetChanges: [], repositoriesRecorded: 0 });

type Trx = Transaction<Database>;

/**
 * Targets of one repository: by the stored repository id first; a target created from a full
 * name only (no id yet) matches on the name, case-insensitively like GitHub.
 */
function sameRepository(repositoryId: number, fullNames: string[]) {
  const names = [...new Set(fullNames.map((n) => n.toLowerCase()))];
  return (eb: ExpressionBuilder<Database, 'github_connector_targets'>): Expression<SqlBool> =>
    eb.or([
      eb('repository_id', '=', String(repositoryId)),
      eb.and([eb('repository_id', 'is', null), eb(sql<string>`lower(repository_full_name)`, 'in', names)]),
    ]);
}

async function insertSyncEvent(
  trx: Trx,
  values: {
    organizationId: string | null;
    deliveryId: string;
    event: string;
    action: string | null;
    kind: GithubSyncKind;
    targetId: string | null;
    installationId: number;
    repository: GithubRepositoryRef | null;
    ref: string | null;
    headSha: string | null;
    status: 'queued' | 'skipped';
    outcome: string | null;
  },
): Promise<GithubSyncEventRecord> {
  const inserted = await trx
    .insertInto('github_sync_events')
    .values({
      id: newSyncEventId(),
      organization_id: values.organizationId,
      delivery_id: values.deliveryId,
      event: values.event,
      action: values.action,
      kind: values.kind,
      target_id: values.targetId,
      installation_id: values.installationId,
      repository_id: values.repository?.id ?? null,
      repository_full_name: values.repository?.fullName ?? null,
      ref: values.ref,
      head_sha: values.headSha,
      status: values.status,
      outcome: values.outcome,
    })
    // Either unique index may fire: (target, head) for a repeated push, or (delivery, target)
    // for a retried activity. Both mean "already recorded".
    .onConflict((oc) => oc.doNothing())
    .returning(['id', 'status', 'outcome'])
    .executeTakeFirst();
  if (inserted) return { id: inserted.id, targetId: values.targetId, status: values.status, outcome: inserted.outcome, created: true };
  const existing = await trx
    .selectFrom('github_sync_events')
    .select(['id', 'status', 'outcome'])
    .where((eb) =>
      values.targetId === null
        ? eb.and([eb('delivery_id', '=', values.deliveryId), eb('target_id', 'is', null)])
        : eb.and([
            eb('target_id', '=', values.targetId),
            eb.or([
              eb('delivery_id', '=', values.deliveryId),
              ...(values.kind === 'push' && values.headSha !== null
                ? [eb.and([eb('kind', '=', 'push'), eb('head_sha', '=', values.headSha)])]
                : []),
            ]),
          ]),
    )
    .orderBy('created_at', 'asc')
    .executeTakeFirstOrThrow();
  return {
    id: existing.id,
    targetId: values.targetId,
    status: existing.status === 'skipped' ? 'skipped' : 'queued',
    outcome: existing.outcome,
    created: false,
  };
}

/** push: one queued sync event per matching active target whose organization owns the installation, else one skipped `no_target`. */
export async function recordPush(db: Db, input: Extract<GithubDeliveryInput, { event: 'push' }>): Promise<DeliveryEffects> {
  return db.transaction().execute(async (trx) => {
    const effects = noEffects();
    const targets = await trx
      .selectFrom('github_connector_targets')
      .selectAll()
      .where('installation_id', '=', String(input.installationId))
      .where('status', '=', 'active')
      .where(ownsInstallation)
      .where(sameRepository(input.repository.id, [input.repository.fullName]))
      .where((eb) => eb.or([eb('ref', 'is', null), eb('ref', '=', input.ref)]))
      .orderBy('id')
      .forUpdate()
      .execute();
    // Learn the id of targets created from a name only, so a later rename still finds them.
    const unnamed = targets.filter((t) => t.repository_id === null).map((t) => t.id);
    if (unnamed.length > 0) {
      await trx
        .updateTable('github_connector_targets')
        .set({ repository_id: input.repository.id, updated_at: sql`now()` })
        .where('id', 'in', unnamed)
        .execute();
    }
    const common = {
      deliveryId: input.deliveryId,
      event: 'push',
      action: null,
      kind: 'push' as const,
      installationId: input.installationId,
      repository: input.repository,
      ref: input.ref,
      headSha: input.headSha,
    };
    for (const target of targets) {
      effects.syncEvents.push(
        await insertSyncEvent(trx, {
          ...common,
          organizationId: target.organization_id,
          targetId: target.id,
          status: 'queued',
          outcome: null,
        }),
      );
    }
    if (targets.length === 0) {
      effects.syncEvents.push(
        await insertSyncEvent(trx, { ...common, organizationId: null, targetId: null, status: 'skipped', outcome: 'no_target' }),
      );
    } else {
      // The newest pushed head waits here until a sync takes the branch head.
      const ids = targets.map((t) => t.id);
      await trx.updateTable('github_connector_targets').set({ pending_sha: input.headSha }).where('id', 'in', ids).execute();
    }
    return effects;
  });
}

/** Sets a status on targets, recording each real change. */
async function setStatus(
  trx: Trx,
  targets: TargetRow[],
  status: GithubTargetStatus,
  reason: string | null,
  effects: DeliveryEffects,
): Promise<void> {
  if (targets.length === 0) return;
  await trx
    .updateTable('github_connector_targets')
    .set({ status, status_reason: reason, updated_at: sql`now()` })
    .where(
      'id',
      'in',
      targets.map((t) => t.id),
    )
    .execute();
  for (const target of targets) {
    if (target.status !== status) effects.targetChanges.push({ targetId: target.id, field: 'status', from: target.status, to: status });
  }
}

/** repository renamed / deleted / transferred. */
export async function applyRepositoryChange(
  db: Db,
  input: Extract<GithubDeliveryInput, { event: 'repository' }>,
): Promise<DeliveryEffects> {
  return db.transaction().execute(async (trx) => {
    const effects = noEffects();
    const { repository } = input;
    let query = trx
      .selectFrom('github_connector_targets')
      .selectAll()
      .select((eb) => ownsInstallation(eb).as('owned'))
      .where(sameRepository(repository.id, [repository.fullName, ...input.previousFullNames]))
      .orderBy('id')
      .forUpdate();
    if (input.installationId !== null) query = query.where('installation_id', '=', String(input.installationId));
    const targets = await query.execute();

    if (input.action === 'renamed') {
      for (const target of targets) {
        if (target.repository_full_name !== repository.fullName || target.repository_id === null) {
          await trx
            .updateTable('github_connector_targets')
            .set({ repository_full_name: repository.fullName, repository_id: repository.id, updated_at: sql`now()` })
            .where('id', '=', target.id)
            .execute();
          if (target.repository_full_name !== repository.fullName) {
            effects.targetChanges.push({
              targetId: target.id,
              field: 'repositoryFullName',
              from: target.repository_full_name,
              to: repository.fullName,
            });
          }
        }
        // Only live targets of the installation's owner get work; a disabled one is resynced when it comes back.
        if (target.status !== 'active' || !target.owned) continue;
        effects.syncEvents.push(
          await insertSyncEvent(trx, {
            organizationId: target.organization_id,
            deliveryId: input.deliveryId,
            event: 'repository',
            action: 'renamed',
            kind: 'full_resync',
            targetId: target.id,
            installationId: Number(target.installation_id),
            repository,
            ref: target.ref,
            headSha: null,
            status: 'queued',
            outcome: null,
          }),
        );
      }
      return effects;
    }

    const live = targets.filter((t) => t.status !== 'disconnected');
    await setStatus(trx, live, 'disabled', input.action === 'deleted' ? 'repository_deleted' : 'repository_transferred', effects);
    return effects;
  });
}

/** installation deleted → disconnected, and nobody owns it any more; suspend → disabled; unsuspend → active again. */
export async function applyInstallationChange(
  db: Db,
  input: Extract<GithubDeliveryInput, { event: 'installation' }>,
): Promise<DeliveryEffects> {
  return db.transaction().execute(async (trx) => {
    const effects = noEffects();
    const targets = await trx
      .selectFrom('github_connector_targets')
      .selectAll()
      .where('installation_id', '=', String(input.installationId))
      .orderBy('id')
      .forUpdate()
      .execute();
    if (input.action === 'deleted') {
      await removeBinding(trx, input.installationId);
      await setStatus(
        trx,
        targets.filter((t) => t.status !== 'disconnected'),
        'disconnected',
        'installation_deleted',
        effects,
      );
    } else if (input.action === 'suspend') {
      await setStatus(
        trx,
        targets.filter((t) => t.status === 'active'),
        'disabled',
        'installation_suspended',
        effects,
      );
    } else {
      // Only what the suspension disabled: a target disabled for another reason stays so.
      const suspended = targets.filter((t) => t.status === 'disabled' && t.status_reason === 'installation_suspended');
      await setStatus(trx, suspended, 'active', null, effects);
    }
    return effects;
  });
}

/**
 * installation_repositories removed → disable those targets; added → record the repositories
 * as available (no target is created), and re-enable targets that were disabled only because
 * the repository had been removed from the installation.
 */
export async function applyInstallationRepositories(
  db: Db,
  input: Extract<GithubDeliveryInput, { event: 'installation_repositories' }>,
): Promise<DeliveryEffects> {
  return db.transaction().execute(async (trx) => {
    const effects = noEffects();
    const status = input.action === 'added' ? 'available' : 'removed';
    for (const repository of input.repositories) {
      await trx
        .insertInto('github_installation_repositories')
        .values({
          installation_id: input.installationId,
          repository_id: repository.id,
          repository_full_name: repository.fullName,
          status,
          delivery_id: input.deliveryId,
        })
        .onConflict((oc) =>
          oc.columns(['installation_id', 'repository_id']).doUpdateSet({
            repository_full_name: repository.fullName,
            status,
            delivery_id: input.deliveryId,
            updated_at: sql`now()`,
          }),
        )
        .execute();
      effects.repositoriesRecorded += 1;
      const targets = await trx
        .selectFrom('github_connector_targets')
        .selectAll()
        .where('installation_id', '=', String(input.installationId))
        .where(sameRepository(repository.id, [repository.fullName]))
        .orderBy('id')
        .forUpdate()
        .execute();
      if (input.action === 'removed') {
        await setStatus(
          trx,
          targets.filter((t) => t.status !== 'disconnected'),
          'disabled',
          'repository_removed',
          effects,
        );
      } else {
        const removed = targets.filter((t) => t.status === 'disabled' && t.status_reason === 'repository_removed');
        await setStatus(trx, removed, 'active', null, effects);
      }
    }
    return effects;
  });
}

// ---------------------------------------------------------------------------------------
// Listing for the admin route.

export interface SyncEventView {
  id: string;
  deliveryId: string;
  event: string;
  action: string | null;
  kind: GithubSyncKind;
  targetId: string | null;
  installationId: number;
  repositoryId: number | null;
  repository: string | null;
  ref: string | null;
  headSha: string | null;
  status: GithubSyncStatus;
  outcome: string | null;
  attempts: number;
  /** Why the sync failed (or, while it is retried, the last failure); null otherwise. */
  error: { code: string; message: string } | null;
  syncedSha: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/**
 * An organization's sync events, newest first; never those of an installation another
 * organization owns (events recorded before ownership existed, or before it moved).
 */
export async function listSyncEvents(
  db: Db,
  filter: { organizationId: string; status?: GithubSyncStatus; repo?: string; limit: number },
): Promise<SyncEventView[]> {
  let query = db
    .selectFrom('github_sync_events')
    .selectAll()
    .where('organization_id', '=', filter.organizationId)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('github_installations as i')
            .select(sql`1`.as('one'))
            .whereRef('i.installation_id', '=', 'github_sync_events.installation_id')
            .where('i.organization_id', '<>', filter.organizationId),
        ),
      ),
    )
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(filter.limit);
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.repo) query = query.where(sql<string>`lower(repository_full_name)`, '=', filter.repo.toLowerCase());
  const rows = await query.execute();
  return rows.map((row) => ({
    id: row.id,
    deliveryId: row.delivery_id,
    event: row.event,
    action: row.action,
    kind: row.kind,
    targetId: row.target_id,
    installationId: Number(row.installation_id),
    repositoryId: row.repository_id === null ? null : Number(row.repository_id),
    repository: row.repository_full_name,
    ref: row.ref,
    headSha: row.head_sha,
    status: row.status,
    outcome: row.outcome,
    attempts: row.attempts,
    error: row.error_code === null ? null : { code: row.error_code, message: row.error_message ?? '' },
    syncedSha: row.synced_sha,
    startedAt: row.started_at?.toISOString() ?? null,
    finishedAt: row.finished_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  }));
}
