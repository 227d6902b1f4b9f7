/**
 * A delivery's effects on connector targets and sync events: the activities of the delivery
 * workflow (workflows/github.ts). Every effect is one transaction and idempotent, because
 * activities retry. Only a target whose installation its organization owns is given sync work.
 */
import { type SqlBool, type Transaction, sql } from 'kysely';
import { typeid } from 'typeid-js';
import type { Db } from '../app/store/db';
import type { Database } from '../app/store/schema';
import type { GithubSyncKind, GithubTargetStatus } from './tables';
import type { GithubDeliveryInput, GithubSyncEventRecord, GithubTargetChange } from './contract';
import { removeBinding } from './installations';
import { ownsInstallation, sameRepository, type TargetRow } from './target-records';
import { refMatches } from './target-match';

const newSyncEventId = () => typeid('gse').toString();

export interface DeliveryEffects {
  syncEvents: GithubSyncEventRecord[];
  targetChanges: GithubTargetChange[];
  repositoriesRecorded: number;
}

const noEffects = (): DeliveryEffects => ({ syncEvents: [], targetChanges: [], repositoriesRecorded: 0 });

type Trx = Transaction<Database>;

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
    repository: { id: number | null; fullName: string } | null;
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
  change: { targets: TargetRow[]; status: GithubTargetStatus; reason: string | null },
  effects: DeliveryEffects,
): Promise<void> {
  const { targets, status, reason } = change;
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

type OwnedRow = TargetRow & { owned: SqlBool };

/**
 * A full resync queued for each target that came back (its organization owning the installation):
 * what it synced may be stale, since a suspended installation gets no webhooks and a repository
 * removed from the installation none of its pushes. Idempotent per delivery and target.
 */
async function queueResyncs(
  trx: Trx,
  resyncs: { cause: { deliveryId: string; event: string; action: string; installationId: number }; targets: OwnedRow[] },
  effects: DeliveryEffects,
): Promise<void> {
  const { cause, targets } = resyncs;
  for (const target of targets) {
    if (target.owned !== true) continue;
    effects.syncEvents.push(
      await insertSyncEvent(trx, {
        organizationId: target.organization_id,
        deliveryId: cause.deliveryId,
        event: cause.event,
        action: cause.action,
        kind: 'full_resync',
        targetId: target.id,
        installationId: cause.installationId,
        repository: { id: target.repository_id === null ? null : Number(target.repository_id), fullName: target.repository_full_name },
        ref: target.ref,
        headSha: null,
        status: 'queued',
        outcome: null,
      }),
    );
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
    const reason = input.action === 'deleted' ? 'repository_deleted' : 'repository_transferred';
    await setStatus(trx, { targets: live, status: 'disabled', reason }, effects);
    return effects;
  });
}

/**
 * What an installation became, from its webhook or from GitHub refusing it a token; an unsuspend
 * names the delivery its resyncs are recorded under.
 */
export type InstallationStateChange =
  { installationId: number; state: 'deleted' | 'suspend' } | { installationId: number; state: 'unsuspend'; deliveryId: string };

/**
 * An installation's state applied to its targets, in the caller's transaction: deleted →
 * disconnected, and nobody owns it any more; suspend → disabled (`installation_suspended`);
 * unsuspend → active again (only what the suspension disabled), each with a full resync queued.
 */
async function applyInstallationState(trx: Trx, change: InstallationStateChange): Promise<DeliveryEffects> {
  const effects = noEffects();
  const targets = await trx
    .selectFrom('github_connector_targets')
    .selectAll()
    .select((eb) => ownsInstallation(eb).as('owned'))
    .where('installation_id', '=', String(change.installationId))
    .orderBy('id')
    .forUpdate()
    .execute();
  if (change.state === 'deleted') {
    await removeBinding(trx, change.installationId);
    const live = targets.filter((t) => t.status !== 'disconnected');
    await setStatus(trx, { targets: live, status: 'disconnected', reason: 'installation_deleted' }, effects);
  } else if (change.state === 'suspend') {
    const active = targets.filter((t) => t.status === 'active');
    await setStatus(trx, { targets: active, status: 'disabled', reason: 'installation_suspended' }, effects);
  } else if (change.state === 'unsuspend') {
    // Only what the suspension disabled: a target disabled for another reason stays so.
    const suspended = targets.filter((t) => t.status === 'disabled' && t.status_reason === 'installation_suspended');
    await setStatus(trx, { targets: suspended, status: 'active', reason: null }, effects);
    const cause = { deliveryId: change.deliveryId, event: 'installation', action: 'unsuspend', installationId: change.installationId };
    await queueResyncs(trx, { cause, targets: suspended }, effects);
  }
  return effects;
}

/**
 * GitHub refused the installation a token because it is suspended or gone: its targets take that
 * state at once, as its webhook would have set it (a suspended installation gets no webhooks, and
 * one lost in an outage may never be redelivered), rather than failing their syncs one by one.
 */
export async function recordInstallationRefused(db: Db, change: { installationId: number; refusal: 'suspend' | 'deleted' }): Promise<void> {
  await db.transaction().execute((trx) => applyInstallationState(trx, { installationId: change.installationId, state: change.refusal }));
}

/** installation deleted, suspend or unsuspend, from its webhook. */
export async function applyInstallationChange(
  db: Db,
  input: Extract<GithubDeliveryInput, { event: 'installation' }>,
): Promise<DeliveryEffects> {
  const { installationId, deliveryId } = input;
  const change: InstallationStateChange =
    input.action === 'unsuspend' ? { installationId, state: 'unsuspend', deliveryId } : { installationId, state: input.action };
  return db.transaction().execute((trx) => applyInstallationState(trx, change));
}

/** The repositories an installation_repositories delivery names, recorded as available or removed (idempotent). */
export async function recordRepositories(
  db: Db | Trx,
  input: Extract<GithubDeliveryInput, { event: 'installation_repositories' }>,
): Promise<number> {
  const status = input.action === 'added' ? 'available' : 'removed';
  for (const repository of input.repositories) {
    await db
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
  }
  return input.repositories.length;
}

/**
 * installation_repositories removed → disable those targets; added → record the repositories
 * as available (no target is created), re-enable targets that were disabled only because the
 * repository had been removed from the installation, and queue a full resync of every live
 * target of those repositories (its last sync may have found the repository out of reach).
 */
export async function applyInstallationRepositories(
  db: Db,
  input: Extract<GithubDeliveryInput, { event: 'installation_repositories' }>,
): Promise<DeliveryEffects> {
  return db.transaction().execute(async (trx) => {
    const effects = noEffects();
    effects.repositoriesRecorded = await recordRepositories(trx, input);
    for (const repository of input.repositories) {
      const targets = await trx
        .selectFrom('github_connector_targets')
        .selectAll()
        .select((eb) => ownsInstallation(eb).as('owned'))
        .where('installation_id', '=', String(input.installationId))
        .where(sameRepository(repository.id, [repository.fullName]))
        .orderBy('id')
        .forUpdate()
        .execute();
      if (input.action === 'removed') {
        const live = targets.filter((t) => t.status !== 'disconnected');
        await setStatus(trx, { targets: live, status: 'disabled', reason: 'repository_removed' }, effects);
        continue;
      }
      const removed = targets.filter((t) => t.status === 'disabled' && t.status_reason === 'repository_removed');
      await setStatus(trx, { targets: removed, status: 'active', reason: null }, effects);
      const back = targets.filter((t) => t.status === 'active' || removed.includes(t));
      const cause = {
        deliveryId: input.deliveryId,
        event: 'installation_repositories',
        action: 'added',
        installationId: input.installationId,
      };
      await queueResyncs(trx, { cause, targets: back }, effects);
    }
    return effects;
  });
}
