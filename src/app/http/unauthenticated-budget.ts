/**
 * The bytes a process holds for request bodies it has not authenticated yet, bounded for the
 * whole process. Signed webhooks must read their body before they can check its signature, so
 * without a bound a few dozen unsigned uploads at a route's size limit would exhaust memory.
 *
 * A body is admitted only if its declared size fits. Bodies over SMALL_BODY_BYTES share at most
 * LARGE_SHARE of the budget between them, so a flood of large unsigned uploads leaves room for
 * the small signed deliveries that make up almost all real traffic. A refused body is answered
 * 503 with `Retry-After` without being held (the route pipeline, src/app/http/route.ts).
 */

/** Bodies up to this size may use the whole budget; larger ones only its large share. */
export const SMALL_BODY_BYTES = 1024 * 1024;
/** The part of the budget that bodies over SMALL_BODY_BYTES may hold together. */
const LARGE_SHARE = 0.75;

export interface UnauthenticatedBudget {
  /** Holds `bytes` and returns the function that gives them back, or undefined when they do not fit. */
  reserve(bytes: number): (() => void) | undefined;
  /** Bytes held now. */
  held(): number;
  /** The largest single body the budget can ever admit (its large share). */
  largestBody(): number;
}

export function createUnauthenticatedBudget(limitBytes: number, onChange: (held: number) => void = () => {}): UnauthenticatedBudget {
  const largeLimit = Math.floor(limitBytes * LARGE_SHARE);
  let total = 0;
  let large = 0;
  return {
    reserve(bytes) {
      const isLarge = bytes > SMALL_BODY_BYTES;
      if (total + bytes > limitBytes || (isLarge && large + bytes > largeLimit)) return undefined;
      total += bytes;
      if (isLarge) large += bytes;
      onChange(total);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        total -= bytes;
        if (isLarge) large -= bytes;
        onChange(total);
      };
    },
    held: () => total,
    largestBody: () => Math.max(largeLimit, Math.min(SMALL_BODY_BYTES, limitBytes)),
  };
}
