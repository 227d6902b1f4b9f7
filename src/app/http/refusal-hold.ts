/**
 * Refusals of load (429 `share` or `capacity`, a webhook's 503 `overloaded`) are answered at once,
 * with the Retry-After they name. Only a sender that comes back before that Retry-After has passed
 * is held a little before its next refusal is answered: each refusal is cheap, but a few
 * connections asking in a tight loop would spend most of a core of the API on refusals alone, on
 * the same machine as the engine, and so take from every other organization what admission kept
 * for them. Held, such a sender gets at most one refusal per hold, for the price of a timer.
 *
 * A sender is its credential (an API key, a runner token or a session; a Slack connection, named
 * by its path; the GitHub App, one per webhook route) on one route, so an organization's other,
 * honest runtimes are never held for an impatient one. `den runtime` and the reference senders
 * honour Retry-After and never meet the hold. The senders remembered and the refusals held at once
 * are bounded per process: past them, refusals are answered at once.
 */
import type { AppError } from '../errors';

/** The codes of the refusals that admission and the live-run capacity answer (src/app/admission.ts, src/runs/capacity.ts). */
const LOAD_REFUSALS: ReadonlySet<string> = new Set(['shed', 'capacity', 'overloaded']);

/** Refusals held at once, per process, at most. */
const MAX_HELD_REFUSALS = 10_000;
/** Senders whose Retry-After is remembered, per process, at most (the oldest are forgotten first). */
const MAX_SENDERS = 100_000;

export interface RefusalHold {
  /**
   * Before a refusal of load is answered to `sender`: waits (at most its Retry-After) if the same
   * sender was refused before and its Retry-After has not passed; returns at once otherwise, and
   * for any other error.
   */
  hold(error: AppError, sender: string): Promise<void>;
  /** Refusals being held now. */
  readonly held: number;
}

/** The Retry-After a refusal of load names, in ms (0 for any other error). */
function retryAfterMsOf(error: Pick<AppError, 'code' | 'headers'>): number {
  if (!LOAD_REFUSALS.has(error.code)) return 0;
  const ms = Number(error.headers['retry-after']) * 1000;
  return Number.isFinite(ms) && ms > 0 ? ms : 1000;
}

/** How long a refusal to a sender that came back early is held: `holdMs`, but never past the Retry-After it names. */
export function holdMsFor(error: Pick<AppError, 'code' | 'headers'>, holdMs: number): number {
  const retryAfterMs = retryAfterMsOf(error);
  if (holdMs <= 0 || retryAfterMs === 0) return 0;
  return Math.min(holdMs, retryAfterMs);
}

export function createRefusalHold(holdMs: number, bounds: { maxHeld?: number; maxSenders?: number; now?: () => number } = {}): RefusalHold {
  const { maxHeld = MAX_HELD_REFUSALS, maxSenders = MAX_SENDERS, now = Date.now } = bounds;
  /** Per sender, until when its last refusal asked it to wait. */
  const waitUntil = new Map<string, number>();
  let held = 0;
  return {
    get held() {
      return held;
    },
    async hold(error, sender) {
      const ms = holdMsFor(error, holdMs);
      if (ms === 0) return;
      const at = now();
      const early = (waitUntil.get(sender) ?? 0) > at;
      waitUntil.delete(sender);
      waitUntil.set(sender, at + retryAfterMsOf(error));
      if (waitUntil.size > maxSenders) waitUntil.delete(waitUntil.keys().next().value!);
      if (!early || held >= maxHeld) return;
      held += 1;
      try {
        await new Promise((resolve) => setTimeout(resolve, ms));
      } finally {
        held -= 1;
      }
    },
  };
}
