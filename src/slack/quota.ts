/**
 * Quotas for Slack invocations: per workspace (600/min by default) and per Slack user (10/min).
 * A flood from one workspace or user is acknowledged (Slack must not retry it) but not routed.
 *
 * Counted in Postgres by the window counter (src/app/store/window-counter.ts), so every API
 * replica draws on the same budget and a restart forgets nothing: one row per (key, fixed
 * one-minute window). Windows start on the service's clock (the routes' injectable `now`), so
 * replicas agree up to their clock skew.
 *
 * When Postgres cannot take the count, the route answers 503 and Slack retries: no invocation
 * is routed without its unit recorded.
 */
import type { SlackSettings } from './settings';
import { AppError, errors } from '../app/errors';
import type { Logger } from '../app/log';
import type { Db } from '../app/store/db';
import { WindowCounter, windowStart } from '../app/store/window-counter';

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

/**
 * Outages are coded 503s already (the pool in store/db.ts). Any other Postgres refusal of a
 * quota write (a read-only failover, a deadlock, a full disk) is a dependency failure too, not
 * a bug: retrying later is the right answer for the sender.
 */
const asUnavailable = (error: unknown): unknown => (error instanceof AppError ? error : errors.unavailable('postgres', error));

export class SlackQuota {
  private readonly counter: WindowCounter;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    options: SlackQuotaOptions = {},
  ) {
    // A take adds at most one row per key, so with the defaults (two keys, a sweep of 1000 rows
    // every 100 takes) sweeps outpace growth tenfold.
    this.counter = new WindowCounter({ db, log, table: 'slack_quota_windows', windowMs: options.windowMs ?? QUOTA_WINDOW_MS, ...options });
  }

  /**
   * Takes one unit from every key, or from none when any is full, one key at a time, each in one
   * statement of its own: a key that is full gives back the units taken before it. No transaction
   * holds a row lock across round trips, so a burst of mentions for one workspace does not queue
   * on its row while each holds a pooled connection (which turned a burst of 30 a second into
   * 503s). Every caller builds the keys with `slackQuotaChecks`, narrowest first, so a user over
   * their own limit touches no workspace unit. `release` gives the units back, for an event that
   * turned out not to be routed after all (a duplicate delivery, a failed enqueue).
   */
  async tryTake(checks: QuotaCheck[], now: number): Promise<QuotaVerdict> {
    const window = windowStart(now, this.counter.windowMs);
    const taken: string[] = [];
    for (const { key, limit } of checks) {
      let ok: boolean;
      try {
        ok = await this.counter.take({ key, window, units: 1, limit });
      } catch (error) {
        await this.release(taken, window);
        throw asUnavailable(error);
      }
      if (!ok) {
        await this.release(taken, window);
        return { ok: false, key };
      }
      taken.push(key);
    }
    await this.counter.sweepSometimes(window);
    let released = false;
    return {
      ok: true,
      release: async () => {
        if (released) return;
        released = true;
        await this.release(taken, window);
      },
    };
  }

  /**
   * Never throws: the callers release on their way to an answer that is already decided (a 503
   * for a failed enqueue, an ack for a duplicate, a full key). A unit that cannot be given back
   * stays spent until its window ends, which errs on the safe side of a quota.
   */
  private async release(keys: string[], window: number): Promise<void> {
    try {
      for (const key of keys) await this.counter.release({ key, window, units: 1 });
    } catch (error) {
      this.log.warn({ err: error, keys }, 'slack quota release failed; the units stay spent until their window ends');
    }
  }
}

/** The user first, then the workspace: a user over their own limit spends none of the workspace's units. */
export function slackQuotaChecks(settings: SlackSettings, teamId: string, slackUserId: string): QuotaCheck[] {
  return [
    { key: `user:${teamId}:${slackUserId}`, limit: settings.userQuotaPerMinute },
    { key: `workspace:${teamId}`, limit: settings.workspaceQuotaPerMinute },
  ];
}
