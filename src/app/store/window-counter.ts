/**
 * Fixed-window counters in Postgres, shared by every replica, so a limit holds across them and a
 * restart forgets nothing: one row per (key, window) in a table of `(key, window_start, used)`
 * with that pair as its primary key and `used >= 0` checked. A take is one atomic upsert that
 * adds all its units or none, and returns no row once the window would pass its limit; the row
 * lock makes takes on every replica queue on it, so none passes the limit. Fixed windows cost
 * one row per key and window instead of one per unit; the price is that a burst straddling a
 * boundary can pass up to twice the limit. The takers sweep old windows themselves.
 *
 * Admission's accepted rate (`admission_windows`, src/app/admission.ts) and Slack's invocation
 * quotas (`slack_quota_windows`, src/slack/quota.ts) count through it, each in its own table.
 */
import { sql, type Kysely } from 'kysely';
import type { Logger } from '../log';
import type { Database } from './schema';

/** A table of counters: a feature declares its own (declaration merging on `Database`) and names it here. */
type CounterTable = {
  [T in keyof Database]: Database[T] extends { key: string; window_start: Date | string; used: number } ? T : never;
}[keyof Database];

/** The start of the fixed window of `windowMs` that holds `now` (ms since the epoch). */
export function windowStart(now: number, windowMs: number): number {
  return Math.floor(now / windowMs) * windowMs;
}

export interface WindowCounterOptions {
  db: Kysely<Database>;
  log: Logger;
  table: CounterTable;
  windowMs: number;
  /** Every this many takes, the taker deletes expired windows (100 unless said). */
  sweepEvery?: number;
  /** At most this many rows per sweep, so a sweep never holds a request for long (1000 unless said). */
  sweepBatch?: number;
}

/** One count: `units` of `key` in the window that starts at `window`, within `limit`. */
interface Count {
  key: string;
  window: number;
  units: number;
  limit: number;
}

export class WindowCounter {
  private takes = 0;

  constructor(private readonly options: WindowCounterOptions) {}

  get windowMs(): number {
    return this.options.windowMs;
  }

  /**
   * All `units` or none, in one upsert: false when the window holds too many already (or the
   * units alone pass the limit). `on`: a transaction to take it in, with other takes that must
   * all pass or all roll back.
   */
  async take(count: Count, on: Kysely<Database> = this.options.db): Promise<boolean> {
    const { key, window, units, limit } = count;
    if (units > limit) return false;
    const table = sql.table(this.options.table);
    const taken = await sql<{ used: number }>`
      INSERT INTO ${table} (key, window_start, used) VALUES (${key}, ${new Date(window)}, ${units})
      ON CONFLICT (key, window_start) DO UPDATE SET used = ${table}.used + ${units}
      WHERE ${table}.used + ${units} <= ${limit}
      RETURNING used`.execute(on);
    return taken.rows.length > 0;
  }

  /** Gives back units a take counted (never below zero); throws what Postgres throws. */
  async release(count: Omit<Count, 'limit'>): Promise<void> {
    const table = sql.table(this.options.table);
    await sql`
      UPDATE ${table} SET used = used - ${count.units}
      WHERE key = ${count.key} AND window_start = ${new Date(count.window)} AND used >= ${count.units}`.execute(this.options.db);
  }

  /**
   * Once every `sweepEvery` calls: deletes windows older than the one before `window` (a replica
   * whose clock runs ahead must not delete the current window of one that runs behind), oldest
   * first and at most `sweepBatch` rows. Best effort: a failed sweep is retried by a later one.
   */
  async sweepSometimes(window: number): Promise<void> {
    const { db, log, table, windowMs, sweepEvery = 100, sweepBatch = 1000 } = this.options;
    if (++this.takes % sweepEvery !== 0) return;
    const before = new Date(window - windowMs);
    try {
      await sql`
        DELETE FROM ${sql.table(table)}
        WHERE (key, window_start) IN (
          SELECT key, window_start FROM ${sql.table(table)}
          WHERE window_start < ${before}
          ORDER BY window_start
          LIMIT ${sweepBatch}
          FOR UPDATE SKIP LOCKED
        )`.execute(db);
    } catch (error) {
      log.warn({ err: error, table }, 'window sweep failed; a later take retries it');
    }
  }
}
