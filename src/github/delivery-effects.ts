/**
 * A delivery's effects on connector targets and sync events: the activities of the delivery
 * workflow (workflows/github.ts). Every effect is one transaction and idempotent, because
 * activities retry. Only a target whose installation its organization owns is given sync work.
 */
import { type Expression, type ExpressionBuilder, type SqlBool, type Transaction, sql } from 'kysely';
import { typeid } from 'typeid-js';
import type { Db } from '../app/store/db';
import type { Database } from '../app/store/schema';
import type { GithubSyncKind, GithubTargetStatus } from './tables';
import type { GithubDeliveryInput, GithubRepositoryRef, GithubSyncEventRecord, GithubTargetChange } from './contract';
import { removeBinding } from './installations';
import { ownsInstallation, type TargetRow } from './target-records';
import { refMatches } from './target-match';

const newSyncEventId = () => typeid('gse').toString();

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

/**
 * push: one queued sync event per matching active target whose organization owns the
 * installation (src/github/target-match.ts), else one skipped `no_target`. A push that names the
 * repository's default branch teaches it to the repository's targets without a ref (they follow
 * it, through a rename too).
 */
export async function recordPush(db: Db, input: Extract<GithubDeliveryInput, { event: 'push' }>): Promise<DeliveryEffects> {
  return db.transaction().execute(async (trx) => {
    const effects = noEffects();
    const candidates = await trx
      .selectFrom('github_connector_targets')
      .selectAll()
      .where('installation_id', '=', String(input.installationId))
      .where('status', '=', 'active')
      .where(ownsInstallation)
      .where(sameRepository(input.repository.id, [input.repository.fullName]))
      .orderBy('id')
      .forUpdate()
      .execute();
    const push = { ref: input.ref, defaultBranch: input.defaultBranch ?? null };
    const targets = candidates.filter((t) => refMatches({ ref: t.ref, defaultBranch: t.default_branch }, push));
    const learning = candidates.filter((t) => t.ref === null && push.defaultBranch !== null && t.default_branch !== push.defaultBranch);
    if (learning.length > 0) {
      await trx
        .updateTable('github_connector_targets')
        .set({ default_branch: push.defaultBranch, updated_at: sql`now()` })
        .where(
          'id',
          'in',
          learning.map((t) => t.id),
        )
        .execute();
    }
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
