/**
 * What a member is told in Slack about their runtime, and about a request that waits: no runtime
 * of theirs is online, their breaker paused them, or their follow-up is queued behind another
 * request of the thread. Pure: built by the activities, asserted by the tests.
 */
import { escapeMrkdwn } from './texts';

const countOf = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** A duration as a member reads it: seconds under two minutes, minutes under two hours, else hours. */
export function humanDuration(ms: number): string {
  const seconds = Math.max(1, Math.round(ms / 1000));
  if (seconds < 120) return countOf(seconds, 'second');
  const minutes = Math.round(seconds / 60);
  if (minutes < 120) return countOf(minutes, 'minute');
  return countOf(Math.round(minutes / 60), 'hour');
}

/** A time of day in UTC, as `14:05 UTC`. */
const clock = (at: number) => `${new Date(at).toISOString().slice(11, 16)} UTC`;

/**
 * The first message of a request no runtime of the member's is there to take: why nothing happens
 * yet, how to start one, and how long the request waits (RUN_CLAIM_DEADLINE). A runtime that
 * claims it turns this message into the usual progress.
 */
export function noRuntimeText(input: { claimDeadlineMs: number; lastSeenAt: number | null; now: number }): string {
  const seen = input.lastSeenAt === null ? '' : ` (one was last seen ${humanDuration(input.now - input.lastSeenAt)} ago)`;
  return (
    `No den runtime of yours is running${seen}, so nothing can pick this request up yet. ` +
    'Start one where your work lives: `npx den runtime --exec "<your agent command>"` (with your den API key in `DEN_API_KEY`). ' +
    `This request waits ${humanDuration(input.claimDeadlineMs)} for it, then gives up.`
  );
}

/** The ephemeral notice of a request the member's open breaker did not start. */
export function pausedText(input: {
  phase: 'open' | 'half_open';
  pausedUntil: number | null;
  lastError: string | null;
  now: number;
}): string {
  const why = input.lastError ? ` The last error: ${escapeMrkdwn(input.lastError.slice(0, 300))}` : '';
  if (input.phase === 'half_open') {
    return (
      'Your den runtime failed several requests in a row, so den is trying one request first to see whether it works again; ' +
      `this one did not start. Ask again once that one has answered.${why}`
    );
  }
  const until = input.pausedUntil ?? input.now;
  return (
    `Your den runtime failed several requests in a row, so den paused your requests: this one did not start.${why} ` +
    `The pause lifts in ${humanDuration(until - input.now)} (at ${clock(until)}); the next request after that runs as a test.`
  );
}

/** What the thread shows of a follow-up that waits for the request ahead of it in the thread. */
export const QUEUED_TEXT = 'Queued: this starts as soon as the request before it in this thread has finished.';
