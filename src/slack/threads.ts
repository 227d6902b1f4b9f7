/**
 * The threads a connection answered in, and what the service holds of them (Postgres):
 *
 * - `slack_threads`: one row per answered thread, written when its first request is reserved, with
 *   the asker (the member whose request opened the conversation). The events route's one lookup
 *   of a channel reply is this table's primary key.
 * - `slack_thread_messages`: the thread's messages the service holds: each request (its text as
 *   routed), each answer (the service's own, `bot`), and what others wrote that it received. A
 *   run's context is read from here first (src/slack/context.ts).
 * - `slack_thread_prompts`: who was already asked to link their account in the thread.
 * - the thread's requests (`slack_member_invocations`, with their thread): a follow-up waits while
 *   an earlier one of its thread is unfinished, and is told when one ends.
 */
import { sql } from 'kysely';
import type { RunContextMessage } from '../runs/contract';
import type { Db } from '../app/store/db';

export interface ThreadKey {
  connectionId: string;
  channel: string;
  threadTs: string;
}

export interface AnsweredThread {
  askerSlackUserId: string;
}

/** A thread as one string: the key of the events route's cache and of its batched lookup. */
export const threadKeyString = (key: ThreadKey): string => `${key.connectionId}\u0000${key.channel}\u0000${key.threadTs}`;

function parseThreadKey(value: string): ThreadKey {
  const [connectionId, channel, threadTs] = value.split('\u0000') as [string, string, string];
  return { connectionId, channel, threadTs };
}

/** Which of these threads were answered, in one query (the primary key). */
export async function findAnsweredThreads(db: Db, keys: string[]): Promise<Map<string, AnsweredThread>> {
  if (keys.length === 0) return new Map();
  const tuples = keys.map(parseThreadKey).map((k) => sql`(${k.connectionId}, ${k.channel}, ${k.threadTs})`);
  const rows = await db
    .selectFrom('slack_threads')
    .select(['connection_id', 'channel', 'thread_ts', 'asker_slack_user_id'])
    .where(sql<boolean>`(connection_id, channel, thread_ts) IN (${sql.join(tuples)})`)
    .execute();
  return new Map(
    rows.map((row) => [
      threadKeyString({ connectionId: row.connection_id, channel: row.channel, threadTs: row.thread_ts }),
      { askerSlackUserId: row.asker_slack_user_id },
    ]),
  );
}

/** A message of an answered thread the service received: kept for the context, once per ts; nothing when the thread is gone. */
export async function recordThreadMessage(
  db: Db,
  thread: ThreadKey,
  message: { ts: string; userId: string | null; bot: boolean; text: string },
): Promise<void> {
  await sql`
    INSERT INTO slack_thread_messages (connection_id, channel, thread_ts, ts, slack_user_id, bot, text)
    SELECT ${thread.connectionId}, ${thread.channel}, ${thread.threadTs}, ${message.ts}, ${message.userId}, ${message.bot}, ${message.text}
    WHERE EXISTS (SELECT 1 FROM slack_threads
                  WHERE connection_id = ${thread.connectionId} AND channel = ${thread.channel} AND thread_ts = ${thread.threadTs})
    ON CONFLICT DO NOTHING`.execute(db);
}

/**
 * A request reserved in a thread: the thread is answered from now on (opened with this asker if it
 * was not yet), and the request is one of its messages. Whether this opened the thread.
 */
export async function recordThreadAsk(
  db: Db,
  thread: ThreadKey & { organizationId: string },
  ask: { ts: string; slackUserId: string; memberId: string; text: string },
): Promise<{ opened: boolean }> {
  const opened = await db
    .insertInto('slack_threads')
    .values({
      connection_id: thread.connectionId,
      channel: thread.channel,
      thread_ts: thread.threadTs,
      organization_id: thread.organizationId,
      asker_slack_user_id: ask.slackUserId,
      asker_member_id: ask.memberId,
    })
    .onConflict((oc) => oc.columns(['connection_id', 'channel', 'thread_ts']).doUpdateSet({ updated_at: sql`now()` }))
    .returning(sql<boolean>`(xmax = 0)`.as('inserted'))
    .executeTakeFirstOrThrow();
  await recordThreadMessage(db, thread, { ts: ask.ts, userId: ask.slackUserId, bot: false, text: ask.text });
  return { opened: opened.inserted };
}

/** The thread's messages the service holds before `beforeTs`, newest first, at most `limit`. */
export async function heldThreadMessages(
  db: Db,
  thread: ThreadKey,
  { beforeTs, limit }: { beforeTs: string; limit: number },
): Promise<RunContextMessage[]> {
  if (limit <= 0) return [];
  const rows = await db
    .selectFrom('slack_thread_messages')
    .select(['ts', 'slack_user_id', 'bot', 'text'])
    .where('connection_id', '=', thread.connectionId)
    .where('channel', '=', thread.channel)
    .where('thread_ts', '=', thread.threadTs)
    .where(sql<boolean>`ts::numeric < ${beforeTs}::numeric`)
    .orderBy(sql`ts::numeric`, 'desc')
    .limit(limit)
    .execute();
  return rows.map((row) => ({ userId: row.slack_user_id, bot: row.bot, text: row.text, ts: row.ts }));
}

/** Messages Slack returned for the thread (conversations.replies), kept so the next request of the thread holds them. */
export async function keepThreadMessages(db: Db, thread: ThreadKey, messages: RunContextMessage[]): Promise<void> {
  for (const message of messages) await recordThreadMessage(db, thread, message);
}

/**
 * Whether this Slack user is asked to link in this thread for the first time (recorded now). A
 * request outside an answered thread always is.
 */
export async function firstLinkPromptInThread(db: Db, thread: ThreadKey, slackUserId: string): Promise<boolean> {
  const result = await sql<{ first: boolean }>`
    WITH thread AS (SELECT 1 FROM slack_threads
                    WHERE connection_id = ${thread.connectionId} AND channel = ${thread.channel} AND thread_ts = ${thread.threadTs}),
         added AS (INSERT INTO slack_thread_prompts (connection_id, channel, thread_ts, slack_user_id)
                   SELECT ${thread.connectionId}, ${thread.channel}, ${thread.threadTs}, ${slackUserId} FROM thread
                   ON CONFLICT DO NOTHING RETURNING 1)
    SELECT (NOT EXISTS (SELECT 1 FROM thread)) OR EXISTS (SELECT 1 FROM added) AS first`.execute(db);
  return result.rows[0]?.first ?? true;
}

/**
 * The request ahead of this one in its thread, if any: an earlier one (by when it was reserved)
 * that has not ended, and is not so old that its workflow must have been ended from outside.
 */
export async function requestAhead(
  db: Db,
  mine: { connectionId: string; eventId: string; staleAfterMs: number; now: Date },
): Promise<{ runId: string } | null> {
  const row = await sql<{ run_id: string }>`
    SELECT o.run_id FROM slack_member_invocations m
    JOIN slack_member_invocations o
      ON o.connection_id = m.connection_id AND o.channel = m.channel AND o.thread_ts = m.thread_ts
    WHERE m.connection_id = ${mine.connectionId} AND m.event_id = ${mine.eventId}
      AND o.ended_at IS NULL AND o.event_id <> m.event_id
      AND (o.started_at, o.event_id) < (m.started_at, m.event_id)
      AND o.started_at > ${new Date(mine.now.getTime() - mine.staleAfterMs)}
    ORDER BY o.started_at LIMIT 1`.execute(db);
  return row.rows[0] ? { runId: row.rows[0].run_id } : null;
}

/** The workflows of the thread's unfinished requests, other than the one that ended: each looks again whether it may start. */
export async function threadWaiters(db: Db, ended: { connectionId: string; eventId: string }): Promise<string[]> {
  const rows = await sql<{ workflow_id: string }>`
    SELECT o.workflow_id FROM slack_member_invocations m
    JOIN slack_member_invocations o
      ON o.connection_id = m.connection_id AND o.channel = m.channel AND o.thread_ts = m.thread_ts
    WHERE m.connection_id = ${ended.connectionId} AND m.event_id = ${ended.eventId}
      AND o.ended_at IS NULL AND o.event_id <> m.event_id AND o.workflow_id IS NOT NULL`.execute(db);
  return rows.rows.map((row) => row.workflow_id);
}

/** Slack's permalinks of these threads' first messages, where known. */
export async function threadPermalinks(db: Db, threads: ThreadKey[]): Promise<Map<string, string>> {
  if (threads.length === 0) return new Map();
  const rows = await findThreadRows(db, threads);
  return new Map(rows.flatMap((row) => (row.permalink === null ? [] : [[threadKeyString(row), row.permalink] as const])));
}

async function findThreadRows(db: Db, threads: ThreadKey[]) {
  const tuples = threads.map((k) => sql`(${k.connectionId}, ${k.channel}, ${k.threadTs})`);
  const rows = await db
    .selectFrom('slack_threads')
    .select(['connection_id', 'channel', 'thread_ts', 'permalink'])
    .where(sql<boolean>`(connection_id, channel, thread_ts) IN (${sql.join(tuples)})`)
    .execute();
  return rows.map((row) => ({ connectionId: row.connection_id, channel: row.channel, threadTs: row.thread_ts, permalink: row.permalink }));
}

export async function rememberPermalink(db: Db, thread: ThreadKey, permalink: string): Promise<void> {
  await db
    .updateTable('slack_threads')
    .set({ permalink })
    .where('connection_id', '=', thread.connectionId)
    .where('channel', '=', thread.channel)
    .where('thread_ts', '=', thread.threadTs)
    .execute();
}

/**
 * A member asked for a surface (their Home tab, the app thread's prompts): true, and recorded, when
 * it was not asked for within `minIntervalMs`; `undo` puts the previous time back (its workflow could
 * not be started, so a retry must not find it fresh).
 */
export async function claimSurfaceRequest(
  db: Db,
  request: { connectionId: string; slackUserId: string; surface: string; now: Date; minIntervalMs: number },
): Promise<{ claimed: false } | { claimed: true; undo: () => Promise<void> }> {
  const before = new Date(request.now.getTime() - request.minIntervalMs);
  const result = await sql<{ previous: Date | null }>`
    WITH previous AS (SELECT requested_at FROM slack_surface_requests
                      WHERE connection_id = ${request.connectionId} AND slack_user_id = ${request.slackUserId} AND surface = ${request.surface})
    INSERT INTO slack_surface_requests AS s (connection_id, slack_user_id, surface, requested_at)
    VALUES (${request.connectionId}, ${request.slackUserId}, ${request.surface}, ${request.now})
    ON CONFLICT (connection_id, slack_user_id, surface) DO UPDATE SET requested_at = EXCLUDED.requested_at
      WHERE s.requested_at <= ${before}
    RETURNING (SELECT requested_at FROM previous) AS previous`.execute(db);
  const row = result.rows[0];
  if (!row) return { claimed: false };
  const previous = row.previous;
  const undo = async () => {
    const where = { connectionId: request.connectionId, slackUserId: request.slackUserId, surface: request.surface };
    if (previous === null) {
      await db
        .deleteFrom('slack_surface_requests')
        .where('connection_id', '=', where.connectionId)
        .where('slack_user_id', '=', where.slackUserId)
        .where('surface', '=', where.surface)
        .where('requested_at', '=', request.now)
        .execute();
      return;
    }
    await db
      .updateTable('slack_surface_requests')
      .set({ requested_at: previous })
      .where('connection_id', '=', where.connectionId)
      .where('slack_user_id', '=', where.slackUserId)
      .where('surface', '=', where.surface)
      .where('requested_at', '=', request.now)
      .execute();
  };
  return { claimed: true, undo };
}

/** Forgets threads idle since `before` (their messages and prompts with them), at most `limit` at a time. */
export async function sweepIdleThreads(db: Db, before: Date, limit = 1000): Promise<number> {
  const result = await sql`
    DELETE FROM slack_threads WHERE (connection_id, channel, thread_ts) IN (
      SELECT connection_id, channel, thread_ts FROM slack_threads WHERE updated_at < ${before} LIMIT ${limit})`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
