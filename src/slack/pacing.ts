/**
 * Posts to one channel at Slack's pace. chat.postMessage "generally allows posting one message
 * per second per channel" (https://docs.slack.dev/apis/web-api/rate-limits): a long answer's parts,
 * or several invocations answering in one channel, would otherwise be refused with 429s. Every
 * worker replica reserves its post's slot from one schedule per connection and channel in
 * Postgres (a row of `slack_api_budgets`, keyed `chat.postMessage <channel>`, under its row lock
 * and on the database's clock): the next free slot is at least SLACK_CHANNEL_POST_INTERVAL after
 * the last one reserved, and a 429 from Slack all the same moves it past its `Retry-After`. A
 * post whose slot is near waits for it where it is; one whose slot is further away is not
 * reserved, and its workflow waits on a timer and asks again.
 */
import type { Db } from '../app/store/db';
import { withBucket } from './budget';

/** The longest a post waits for its slot inside its activity; longer, the workflow waits instead. */
export const MAX_INLINE_WAIT_MS = 3_000;

/** The schedule as stored: `at` is the earliest the next post may go (the bucket row's `refreshed_at`). */
interface Schedule {
  at: number;
}

/** A slot: reserved (wait this long, then post), or not (ask again after this long). */
export type Slot = { reserved: true; waitMs: number } | { reserved: false; waitMs: number };

/** A channel's pace: the least time between two posts, and the longest a post may wait for its slot. */
interface Pace {
  intervalMs: number;
  maxWaitMs: number;
}

/** The next slot of a channel's schedule at `now`, one `intervalMs` after the last reserved, if it is within `maxWaitMs`. */
export function reserveSlot(schedule: Schedule | undefined, now: number, { intervalMs, maxWaitMs }: Pace): { slot: Slot; next: Schedule } {
  const at = Math.max(schedule?.at ?? now, now);
  if (at - now > maxWaitMs) return { slot: { reserved: false, waitMs: at - now - maxWaitMs }, next: { at } };
  return { slot: { reserved: true, waitMs: at - now }, next: { at: at + intervalMs } };
}

/** Slack answered 429 all the same: no post to the channel before its Retry-After has passed. */
export function holdSchedule(schedule: Schedule | undefined, now: number, retryAfterMs: number): Schedule {
  return { at: Math.max(schedule?.at ?? now, now + retryAfterMs) };
}

const key = (channel: string) => ({ method: `chat.postMessage ${channel}` });

/** The channel posts of every connection, paced through Postgres. */
export class ChannelPacer {
  constructor(
    private readonly db: Db,
    private readonly intervalMs: number,
  ) {}

  /** Reserves the next slot for a post to `channel`, within MAX_INLINE_WAIT_MS. */
  async reserve(connectionId: string, channel: string): Promise<Slot> {
    let slot: Slot = { reserved: true, waitMs: 0 };
    await withBucket(this.db, { connectionId, ...key(channel) }, (state, now) => {
      const reserved = reserveSlot(state && { at: state.at }, now, { intervalMs: this.intervalMs, maxWaitMs: MAX_INLINE_WAIT_MS });
      slot = reserved.slot;
      return { next: { tokens: 0, at: reserved.next.at }, verdict: { taken: true, tokens: 0 } };
    });
    return slot;
  }

  /** Slack rate-limited a post to `channel`: the next slot is after its Retry-After. */
  async hold(connectionId: string, channel: string, retryAfterMs: number): Promise<void> {
    await withBucket(this.db, { connectionId, ...key(channel) }, (state, now) => ({
      next: { tokens: 0, at: holdSchedule(state && { at: state.at }, now, retryAfterMs).at },
      verdict: { taken: false, waitMs: retryAfterMs, tokens: 0 },
    }));
  }
}
