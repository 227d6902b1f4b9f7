/**
 * Refusals of load (429 `share` or `capacity`, a webhook's 503 `overloaded`) are answered after a
 * short hold. A sender that ignores Retry-After and asks again at once would otherwise spin: each
 * refusal is cheap, but a few connections asking in a tight loop spend most of a core of the API
 * on refusals alone, on the same machine as the engine, and so take from every other
 * organization what admission kept for them. Held, each connection gets at most one refusal per
 * hold, for the price of a timer. The number held at once is bounded, so a flood cannot hold
 * sockets without end: past the bound, refusals are answered at once.
 */
import type { AppError } from '../errors';

/** The codes of the refusals that admission and the live-run capacity answer (src/app/admission.ts, src/runs/capacity.ts). */
const LOAD_REFUSALS: ReadonlySet<string> = new Set(['shed', 'capacity', 'overloaded']);

/** Refusals held at once, per process, at most. */
const MAX_HELD_REFUSALS = 10_000;

export interface RefusalHold {
  /** Waits before a refusal of load is answered (at most its Retry-After); returns at once for any other error. */
  hold(error: AppError): Promise<void>;
  /** Refusals being held now. */
  readonly held: number;
}

/** How long a refusal is held: `holdMs`, but never past the Retry-After it names. */
export function holdMsFor(error: Pick<AppError, 'code' | 'headers'>, holdMs: number): number {
  if (holdMs <= 0 || !LOAD_REFUSALS.has(error.code)) return 0;
  const retryAfterMs = Number(error.headers['retry-after']) * 1000;
  return Number.isFinite(retryAfterMs) && retryAfterMs > 0 ? Math.min(holdMs, retryAfterMs) : holdMs;
}

export function createRefusalHold(holdMs: number, maxHeld = MAX_HELD_REFUSALS): RefusalHold {
  let held = 0;
  return {
    get held() {
      return held;
    },
    async hold(error) {
      const ms = holdMsFor(error, holdMs);
      if (ms === 0 || held >= maxHeld) return;
      held += 1;
      try {
        await new Promise((resolve) => setTimeout(resolve, ms));
      } finally {
        held -= 1;
      }
    },
  };
}
