/**
 * Per-member limits on runs created from Slack: a number per rolling day and a number running
 * at once. A reservation is a row per invocation, written under a
 * per-member advisory lock so two invocations of one member cannot both take the last slot.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';

export interface MemberLimits {
  dailyInvocations: number;
  concurrentRuns: number;
  /**
   * An unfinished reservation older than this no longer counts as running: its workflow was
   * terminated by an operator and never released it. Longer than any run can live.
   */
  staleAfterMs: number;
}

export type ReservationOutcome =
  | { ok: true; runId: string }
  | { ok: false; limit: 'daily' | 'concurrent'; used: number; max: number }
  /** The connection was removed while its event was on its way: nothing to reserve against. */
  | { ok: false; removed: 'connection_deleted' };

const DAY_MS = 86_400_000;

export async function reserveMemberInvocation(
  db: Db,
  input: {
    connectionId: string;
    eventId: string;
    organizationId: string;
    memberId: string;
    runId: string;
    now: Date;
    limits: MemberLimits;
    /** The thread it answers in, and its workflow (told when the request ahead of it in the thread ends). */
    thread?: { channel: string; threadTs: string; workflowId: string };
  },
): Promise<ReservationOutcome> {
  return db.transaction().execute(async (trx): Promise<ReservationOutcome> => {
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`slack-member:${input.memberId}`}, 0))`.execute(trx);
    // The reservation refers to its connection: one removed meanwhile would refuse the row for ever.
    const connection = await trx
      .selectFrom('slack_connections')
      .select('id')
      .where('id', '=', input.connectionId)
      .forShare()
      .executeTakeFirst();
    if (!connection) return { ok: false, removed: 'connection_deleted' };
    // An activity retry after a lost reply finds its own reservation.
    const mine = await trx
      .selectFrom('slack_member_invocations')
      .select('run_id')
      .where('connection_id', '=', input.connectionId)
      .where('event_id', '=', input.eventId)
      .executeTakeFirst();
    if (mine) return { ok: true, runId: mine.run_id };

    const now = input.now.getTime();
    const counts = await trx
      .selectFrom('slack_member_invocations')
      .select((eb) => [
        eb.fn.countAll<string>().as('daily'),
        eb.fn
          .count<string>('event_id')
          .filterWhere((w) => w.and([w('ended_at', 'is', null), w('started_at', '>', new Date(now - input.limits.staleAfterMs))]))
          .as('running'),
      ])
      .where('member_id', '=', input.memberId)
      .where('started_at', '>', new Date(now - DAY_MS))
      .executeTakeFirstOrThrow();
    const daily = Number(counts.daily);
    const running = Number(counts.running);
    if (daily >= input.limits.dailyInvocations) return { ok: false, limit: 'daily', used: daily, max: input.limits.dailyInvocations };
    if (running >= input.limits.concurrentRuns) {
      return { ok: false, limit: 'concurrent', used: running, max: input.limits.concurrentRuns };
    }
    await trx
      .insertInto('slack_member_invocations')
      .values({
        connection_id: input.connectionId,
        event_id: input.eventId,
        organization_id: input.organizationId,
        member_id: input.memberId,
        run_id: input.runId,
        started_at: input.now,
        ...(input.thread ? { channel: input.thread.channel, thread_ts: input.thread.threadTs, workflow_id: input.thread.workflowId } : {}),
      })
      .execute();
    return { ok: true, runId: input.runId };
  });
}

export async function releaseMemberInvocation(
  db: Db,
  { connectionId, eventId, now }: { connectionId: string; eventId: string; now: Date },
): Promise<void> {
  await db
    .updateTable('slack_member_invocations')
    .set({ ended_at: now })
    .where('connection_id', '=', connectionId)
    .where('event_id', '=', eventId)
    .where('ended_at', 'is', null)
    .execute();
}
