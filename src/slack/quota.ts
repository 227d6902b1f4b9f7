/**
 * Quotas for Slack invocations: per workspace (600/min by default) and per Slack user (10/min).
 * A flood from one workspace or user is acknowledged (Slack must not retry it) but not routed.
 *
 * Counted in Postgres, so every API replica draws on the same budget and a restart forgets
 * nothing: one row per (key, fixed one-minute window), taken with an atomic upsert. Fixed windows
 * cost one row per key and minute instead of one per invocation; the price is that a burst
 * straddling a window boundary can pass up to twice the limit. Windows start on the service's
 * clock (the routes' injectable `now`), so replicas agree up to their clock skew.
 *
 * When Postgres cannot take the count, the route answers 503 and Slack retries: no invocation
 * is routed without its unit recorded.
 */
import { sql } from 'kysely';
import type { SlackSettings } from './settings';
import { AppError, errors } from '../app/errors';
import type { Logger } from '../app/log';
import type { Db } from '../app/store/db';

export const QUOTA_WINDOW_MS = 60_000;

export interface QuotaCheck {
  key: string;
  limit: number;
}

export type QuotaVerdict = { ok: true; release: () => Promise<void> } | { ok: false; key: string };

export interface SlackQuotaOptions {
  windowMs?: number;
  /** Every this many takes, this process deletes expired windows. */
  sweepEvery?: number;
  /** At most this many rows per sweep, so a sweep never holds a request for long. */
  sweepBatch?: number;
}

/** The start of the fixed window that holds `now` (ms since the epoch). */
export function windowStart(now: number, windowMs = QUOTA_WINDOW_MS): number {
  return Math.floor(now / windowMs) * windowMs;
}

/** Thrown inside the take's transaction to roll it back: the key is full. */
class QuotaFull extends Error {
  constructor(readonly key: string) {
    super(`quota ${key} is full`);
  }
}

/**
 * Outages are coded 503s already (the pool in store/db.ts). Any other Postgres refusal of a
 * quota write (a read-only failover, a deadlock, a full disk) is a dependency failure too, not
 * a bug: retrying later is the right answer for the sender.
 */
const asUnavailable = (error: unknown): unknown => (error instanceof AppError ? error : errors.unavailable('postgres', error));

export class SlackQuota {
  private readonly windowMs: number;
  private readonly sweepEvery: number;
  private readonly sweepBatch: number;
  private takes = 0;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    options: SlackQuotaOptions = {},
  ) {
    this.windowMs = options.windowMs ?? QUOTA_WINDOW_MS;
    this.sweepEvery = options.sweepEvery ?? 100;
    this.sweepBatch = options.sweepBatch ?? 1000;
  }

  /**
   * Takes one unit from every key, or from none when any is full (so a user over their own
   * limit does not eat the workspace's budget), in one transaction. Keys are taken in the order
   * given; every caller builds them with `slackQuotaChecks`, so concurrent takes lock rows in the
   * same order. `release` gives the units back, for an event that turned out not to be routed
   * after all (a duplicate delivery, a failed enqueue).
   */
  async tryTake(checks: QuotaCheck[], now: number): Promise<QuotaVerdict> {
    const start = new Date(windowStart(now, this.windowMs));
    try {
      await this.db.transaction().execute(async (trx) => {
        for (const check of checks) {
          if (check.limit < 1) throw new QuotaFull(check.key);
          // A full row returns nothing; the upsert locks the row, so takes on every replica
          // queue on it and none can pass the limit.
          const taken = await trx
            .insertInto('slack_quota_windows')
            .values({ key: check.key, window_start: start, used: 1 })
            .onConflict((oc) =>
              oc
                .columns(['key', 'window_start'])
                .doUpdateSet({ used: sql<number>`slack_quota_windows.used + 1` })
                .where('slack_quota_windows.used', '<', check.limit),
            )
            .returning('used')
            .executeTakeFirst();
          if (!taken) throw new QuotaFull(check.key);
        }
      });
    } catch (error) {
      if (error instanceof QuotaFull) return { ok: false, key: error.key };
      throw asUnavailable(error);
    }
    await this.maybeSweep(now);
    const keys = checks.map((check) => check.key);
    let released = false;
    return {
      ok: true,
      release: async () => {
        if (released) return;
        released = true;
        await this.release(keys, start);
      },
    };
  }

  /**
   * Never throws: the callers release on their way to an answer that is already decided (a 503
   * for a failed enqueue, an ack for a duplicate). A unit that cannot be given back stays spent
   * until its window ends, which errs on the safe side of a quota.
   */
  private async release(keys: string[], start: Date): Promise<void> {
    try {
      // One row per statement: an UPDATE of both rows at once locks them in whatever order it
      // finds them, and a take on another replica, holding the workspace row and waiting for the
      // user row, would deadlock with it (Postgres then aborts the take with a 503).
      for (const key of keys) {
        await this.db
          .updateTable('slack_quota_windows')
          .set({ used: sql<number>`used - 1` })
          .where('key', '=', key)
          .where('window_start', '=', start)
          .where('used', '>', 0)
          .execute();
      }
    } catch (error) {
      this.log.warn({ err: error, keys }, 'slack quota release failed; the units stay spent until their window ends');
    }
  }

  /**
   * Deletes windows older than the previous one (a replica whose clock runs ahead must not
   * delete the current window of one that runs behind), oldest first and at most `sweepBatch`
   * rows. A take adds at most one row per key, so with the defaults (two keys, every 100 takes,
   * 1000 rows) sweeps outpace growth tenfold. Best effort: a failed sweep is retried by a later one.
   */
  private async maybeSweep(now: number): Promise<void> {
    if (++this.takes % this.sweepEvery !== 0) return;
    const before = new Date(windowStart(now, this.windowMs) - this.windowMs);
    try {
      await sql`
        DELETE FROM slack_quota_windows
        WHERE (key, window_start) IN (
          SELECT key, window_start FROM slack_quota_windows
          WHERE window_start < ${before}
          ORDER BY window_start
          LIMIT ${this.sweepBatch}
          FOR UPDATE SKIP LOCKED
        )`.execute(this.db);
    } catch (error) {
      this.log.warn({ err: error }, 'slack quota sweep failed; a later take retries it');
    }
  }
}

/** Workspace first, then user: the one order in which every take locks its rows. */
export function slackQuotaChecks(settings: SlackSettings, teamId: string, slackUserId: string): QuotaCheck[] {
  return [
    { key: `workspace:${teamId}`, limit: settings.workspaceQuotaPerMinute },
    { key: `user:${teamId}:${slackUserId}`, limit: settings.userQuotaPerMinute },
  ];
}
