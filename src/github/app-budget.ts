/**
 * The App's own budget with GitHub, shared by every worker of every replica. The reconcile's calls
 * to the App's routes (the delivery log, a delivery's detail, a redelivery) carry the App's JWT,
 * so GitHub counts them against the App, whichever process makes them: GitHub's secondary limit
 * allows 900 points a minute (a GET 1, a POST 5), and calling while limited risks a ban.
 *
 * - Every call is paid for before it is made, in Postgres (`github_app_points`, one row a call,
 *   under a transaction-scoped advisory lock per App): at most GITHUB_RECONCILE_POINTS_PER_MINUTE
 *   in any 60 s, across processes. A call the budget cannot pay for is not made; the caller learns
 *   when enough points come back.
 * - A rate limit GitHub answers the App is kept in `github_app_limits`: no call to its routes
 *   before that time (GitHub's `retry-after` or `x-ratelimit-reset`, never less than a minute;
 *   without either a minute, doubled for each such limit in a row), whichever process asks.
 * - One reconcile at a time reads the delivery log and asks for redeliveries: the run holds a
 *   session advisory lock per App on a connection of its own for as long as it calls GitHub
 *   (freed by Postgres if the worker dies), and a second run finds it held and leaves the log alone.
 */
import { sql } from 'kysely';
import type { Db } from '../app/store/db';
import { classifyGithubFailure, type GithubFailure } from './api-errors';

/** GitHub's points for the secondary limit: most GETs cost 1, most POSTs 5. */
export const CALL_POINTS = { GET: 1, POST: 5 } as const;
const WINDOW_MS = 60_000;

export type Spend = { ok: true } | { ok: false; untilMs: number; why: 'budget' | 'rate_limit' };

export interface AppBudget {
  /** Pays `points` for a call about to be made, or says when the App may call again. */
  spend(points: number): Promise<Spend>;
  /** GitHub rate-limited the App (answering `failure`): no call to its routes until the time this answers (epoch ms). */
  limited(failure: GithubFailure): Promise<number>;
  /** GitHub answered the App: the next limit without a stated time waits the minimum again. */
  answered(): Promise<void>;
  /** Points this run spent. */
  readonly spent: number;
}

const appKey = (appId: string) => sql`hashtextextended(${`github-app:${appId}`}, 0)`;

/** When enough of the window's points will have aged out for `points` more to fit under `limit`. */
function freedAt(window: { spent_at: Date; points: number }[], points: number, limit: number): number {
  let total = window.reduce((sum, row) => sum + row.points, 0);
  for (const row of window) {
    total -= row.points;
    if (total + points <= limit) return row.spent_at.getTime() + WINDOW_MS;
  }
  return (window.at(-1)?.spent_at.getTime() ?? 0) + WINDOW_MS;
}

export function appBudget(db: Db, app: { appId: string; pointsPerMinute: number; now: () => number }): AppBudget {
  let spent = 0;
  return {
    get spent() {
      return spent;
    },
    async spend(points) {
      const now = app.now();
      const refused = await db.transaction().execute(async (trx): Promise<Spend | undefined> => {
        await sql`SELECT pg_advisory_xact_lock(${appKey(app.appId)})`.execute(trx);
        const limit = await trx.selectFrom('github_app_limits').select('limited_until').where('app_id', '=', app.appId).executeTakeFirst();
        if (limit && limit.limited_until.getTime() > now) return { ok: false, untilMs: limit.limited_until.getTime(), why: 'rate_limit' };
        const since = new Date(now - WINDOW_MS);
        await trx.deleteFrom('github_app_points').where('app_id', '=', app.appId).where('spent_at', '<=', since).execute();
        const window = await trx
          .selectFrom('github_app_points')
          .select(['spent_at', 'points'])
          .where('app_id', '=', app.appId)
          .orderBy('spent_at')
          .execute();
        const total = window.reduce((sum, row) => sum + row.points, 0);
        if (total + points > app.pointsPerMinute)
          return { ok: false, untilMs: freedAt(window, points, app.pointsPerMinute), why: 'budget' };
        await trx
          .insertInto('github_app_points')
          .values({ app_id: app.appId, spent_at: new Date(now), points })
          .execute();
        return undefined;
      });
      if (refused) return refused;
      spent += points;
      return { ok: true };
    },
    async limited(failure) {
      const row = await db.selectFrom('github_app_limits').select('strikes').where('app_id', '=', app.appId).executeTakeFirst();
      const context = { attempt: 1, baseDelayMs: 0, nowMs: app.now(), random: Math.random, rateLimitStrikes: row?.strikes ?? 0 };
      const verdict = classifyGithubFailure(failure, context);
      // Never sooner than a minute, whatever GitHub names: calling the App's routes while limited risks a ban.
      const untilMs = Math.max(app.now() + WINDOW_MS, verdict.kind === 'rate_limited' ? verdict.untilMs : 0);
      const strikes = verdict.kind === 'rate_limited' && verdict.headerless ? 1 : 0;
      const saved = await db
        .insertInto('github_app_limits')
        .values({ app_id: app.appId, limited_until: new Date(untilMs), strikes })
        .onConflict((oc) =>
          oc.column('app_id').doUpdateSet({
            limited_until: sql`greatest(github_app_limits.limited_until, excluded.limited_until)`,
            strikes: sql`github_app_limits.strikes + excluded.strikes`,
          }),
        )
        .returning('limited_until')
        .executeTakeFirstOrThrow();
      return saved.limited_until.getTime();
    },
    async answered() {
      await db.updateTable('github_app_limits').set({ strikes: 0 }).where('app_id', '=', app.appId).where('strikes', '>', 0).execute();
    },
  };
}

/**
 * Runs `work` while this process holds the App's reconcile lock, or answers `busy` without running
 * it when another run holds it. The lock is Postgres's (a session advisory lock on a connection
 * held for the run), so it holds across processes and goes with a worker that dies.
 */
export async function withAppLock<T>(db: Db, appId: string, work: () => Promise<T>): Promise<T | 'busy'> {
  return db.connection().execute(async (conn) => {
    const key = sql`hashtextextended(${`github-app-reconcile:${appId}`}, 0)`;
    const { rows } = await sql<{ locked: boolean }>`SELECT pg_try_advisory_lock(${key}) AS locked`.execute(conn);
    if (!rows[0]?.locked) return 'busy';
    try {
      return await work();
    } finally {
      await sql`SELECT pg_advisory_unlock(${key})`.execute(conn);
    }
  });
}
