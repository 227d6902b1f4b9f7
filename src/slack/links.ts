/**
 * Account links (Slack user of a connection → member), redeemed link tokens, and invocations
 * waiting for a link.
 *
 * The race that matters: an invocation finds no link and starts waiting while, at the same
 * moment, the member completes the link. Both sides take the same transaction-scoped advisory
 * lock on (connection, Slack user), so either the invocation sees the link, or the link route
 * sees the waiting invocation and signals it. Never neither.
 */
import { sql, type Transaction } from 'kysely';
import type { Db } from '../app/store/db';
import type { Database } from '../app/store/schema';

export interface AccountLink {
  organizationId: string;
  memberId: string;
}

async function lockSlackUser(trx: Transaction<Database>, connectionId: string, slackUserId: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`slack-link:${connectionId}:${slackUserId}`}, 0))`.execute(trx);
}

export async function findAccountLink(
  db: Db | Transaction<Database>,
  connectionId: string,
  slackUserId: string,
): Promise<AccountLink | undefined> {
  // A link to a member who has since been removed does not count.
  return db
    .selectFrom('slack_account_links as l')
    .innerJoin('members as m', 'm.id', 'l.member_id')
    .select(['l.organization_id as organizationId', 'l.member_id as memberId'])
    .where('l.connection_id', '=', connectionId)
    .where('l.slack_user_id', '=', slackUserId)
    .where('m.removed_at', 'is', null)
    .executeTakeFirst();
}

/** Why an invocation cannot wait for a link: its connection was uninstalled, or removed. */
export type ConnectionGone = { removed: 'app_uninstalled' | 'connection_deleted' };

/**
 * The invocation side: returns the link, or records the invocation as waiting for one, or says
 * the connection is gone (src/slack/connection-lifecycle.ts: its row's share lock orders this
 * against an uninstall or a removal). Idempotent (an activity retry finds its own row).
 */
export async function linkOrWait(
  db: Db,
  input: { connectionId: string; slackUserId: string; eventId: string; workflowId: string; expiresAt: Date },
): Promise<AccountLink | ConnectionGone | undefined> {
  return db.transaction().execute(async (trx) => {
    await lockSlackUser(trx, input.connectionId, input.slackUserId);
    const connection = await trx
      .selectFrom('slack_connections')
      .select('uninstalled_at')
      .where('id', '=', input.connectionId)
      .forShare()
      .executeTakeFirst();
    if (!connection) return { removed: 'connection_deleted' } as const;
    if (connection.uninstalled_at !== null) return { removed: 'app_uninstalled' } as const;
    const link = await findAccountLink(trx, input.connectionId, input.slackUserId);
    if (link) return link;
    await trx
      .insertInto('slack_pending_invocations')
      .values({
        connection_id: input.connectionId,
        event_id: input.eventId,
        slack_user_id: input.slackUserId,
        workflow_id: input.workflowId,
        expires_at: input.expiresAt,
      })
      .onConflict((oc) => oc.columns(['connection_id', 'event_id']).doNothing())
      .execute();
    return undefined;
  });
}

export async function clearPendingInvocation(db: Db, connectionId: string, eventId: string): Promise<void> {
  await db.deleteFrom('slack_pending_invocations').where('connection_id', '=', connectionId).where('event_id', '=', eventId).execute();
}

export type RedeemOutcome =
  { ok: true; created: boolean; waitingWorkflowIds: string[] } | { ok: false; error: 'link_used' | 'already_linked' };

/**
 * The link side, in one transaction: the token's nonce is spent, the link written, and
 * `notify` is called with the waiting invocations' workflow ids BEFORE the commit. If `notify`
 * throws (Temporal unreachable), everything rolls back and the token stays redeemable, so the
 * member can simply retry; a committed link whose waiting invocations were never told is what
 * this avoids.
 */
export async function redeemLink(
  db: Db,
  input: {
    connectionId: string;
    slackUserId: string;
    organizationId: string;
    memberId: string;
    nonce: string;
    tokenExpiresAt: Date;
    now: Date;
  },
  notify: (workflowIds: string[]) => Promise<void>,
): Promise<RedeemOutcome> {
  return db
    .transaction()
    .execute(async (trx): Promise<RedeemOutcome> => {
      await lockSlackUser(trx, input.connectionId, input.slackUserId);
      const used = await trx
        .insertInto('slack_used_link_tokens')
        .values({
          nonce: input.nonce,
          connection_id: input.connectionId,
          slack_user_id: input.slackUserId,
          member_id: input.memberId,
          used_at: input.now,
          expires_at: input.tokenExpiresAt,
        })
        .onConflict((oc) => oc.column('nonce').doNothing())
        .returning('nonce')
        .executeTakeFirst();
      if (!used) return { ok: false, error: 'link_used' };

      const existing = await trx
        .selectFrom('slack_account_links as l')
        .leftJoin('members as m', 'm.id', 'l.member_id')
        .select(['l.member_id as memberId', 'm.removed_at as removedAt'])
        .where('l.connection_id', '=', input.connectionId)
        .where('l.slack_user_id', '=', input.slackUserId)
        .executeTakeFirst();
      if (existing && existing.memberId !== input.memberId && existing.removedAt === null) {
        // Nothing of this transaction may stick, the spent nonce included: throw to roll back.
        throw new AlreadyLinked();
      }
      let created = false;
      if (!existing || existing.memberId !== input.memberId) {
        // No link, or a link to a member who was removed since: (re)point it at the caller.
        await trx
          .insertInto('slack_account_links')
          .values({
            connection_id: input.connectionId,
            slack_user_id: input.slackUserId,
            organization_id: input.organizationId,
            member_id: input.memberId,
            created_at: input.now,
          })
          .onConflict((oc) =>
            oc
              .columns(['connection_id', 'slack_user_id'])
              .doUpdateSet({ member_id: input.memberId, organization_id: input.organizationId, created_at: input.now }),
          )
          .execute();
        created = true;
      }

      const waiting = await trx
        .deleteFrom('slack_pending_invocations')
        .where('connection_id', '=', input.connectionId)
        .where('slack_user_id', '=', input.slackUserId)
        .returning('workflow_id')
        .execute();
      const workflowIds = waiting.map((w) => w.workflow_id);
      await notify(workflowIds);
      return { ok: true, created, waitingWorkflowIds: workflowIds };
    })
    .catch((error: unknown) => {
      if (error instanceof AlreadyLinked) return { ok: false, error: 'already_linked' } as const;
      throw error;
    });
}

class AlreadyLinked extends Error {}
