/**
 * The bytes a process holds for request bodies it has not authenticated yet, bounded for the
 * whole process. Signed webhooks must read their body before they can check its signature, so
 * without a bound a few dozen unsigned uploads at a route's size limit would exhaust memory.
 *
 * A body is admitted only if its declared size fits, under three bounds:
 * - the whole budget;
 * - LARGE_SHARE of it for bodies over SMALL_BODY_BYTES together, so a flood of large unsigned
 *   uploads leaves room for the small signed deliveries that make up almost all real traffic;
 * - `perAddressBytes` for one client address (src/app/http/client-address.ts), so one source
 *   cannot take the budget by itself.
 *
 * A held body must keep arriving at `minBytesPerSecond` or better, counted from its first byte:
 * - once `graceMs` has passed, a body behind that rate is cut off and its bytes given back;
 * - before that, a body behind the rate may be cut off sooner (after PREEMPT_AFTER_MS) when a
 *   new body needs its room: a slow upload holds the budget only while nobody else needs it.
 *
 * A body refused room is answered 503 with `Retry-After`, and one cut off 408, without being
 * held further (the route pipeline, src/app/http/route.ts).
 */

/** Bodies up to this size may use the whole budget; larger ones only its large share. */
export const SMALL_BODY_BYTES = 1024 * 1024;
/** The part of the budget that bodies over SMALL_BODY_BYTES may hold together. */
const LARGE_SHARE = 0.75;
/** How long a new body may stay behind the minimum rate before another body may take its room. */
export const PREEMPT_AFTER_MS = 250;
/** How often held bodies are checked against the minimum rate. */
const SWEEP_INTERVAL_MS = 250;

export interface UnauthenticatedBudgetSettings {
  budgetBytes: number;
  perAddressBytes: number;
  minBytesPerSecond: number;
  graceMs: number;
}

export type CutReason = 'slow' | 'preempted';

/** One body's room in the budget. */
export interface BodyHold {
  /** Counts bytes of the body that have arrived. */
  received(bytes: number): void;
  /** The whole body has arrived: it is no longer behind any rate. */
  complete(): void;
  /** Gives the room back (again is a no-op; a body cut off has already given it back). */
  release(): void;
}

export interface UnauthenticatedBudget {
  /**
   * Holds `bytes` for a body from `address`, cutting off slow bodies if that makes room, and
   * returns the hold; undefined when it does not fit. `cut` is called if this body is cut off.
   */
  reserve(bytes: number, address: string, cut: (reason: CutReason) => void): BodyHold | undefined;
  /** Bytes held now. */
  held(): number;
  /** The largest single body the budget can ever admit. */
  largestBody(): number;
  /** Cuts off the bodies past their grace that are behind the minimum rate (a timer calls it while bodies are held). */
  sweep(): void;
}

/** Bytes a body of `size` should have delivered `elapsedMs` after its start at `minBytesPerSecond`. */
export function expectedBytes(elapsedMs: number, size: number, minBytesPerSecond: number): number {
  return Math.min(size, (minBytesPerSecond * elapsedMs) / 1000);
}

interface Hold {
  bytes: number;
  large: boolean;
  address: string;
  startedAt: number;
  arrived: number;
  cut: (reason: CutReason) => void;
}

/** What is held now: in all, by bodies over SMALL_BODY_BYTES, and by one address; less what cuts would free. */
interface Held {
  total: number;
  large: number;
  address: number;
}

class HeldBodyBudget implements UnauthenticatedBudget {
  private readonly largeLimit: number;
  private readonly holds = new Set<Hold>();
  private readonly byAddress = new Map<string, number>();
  private total = 0;
  private large = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly settings: UnauthenticatedBudgetSettings,
    private readonly hooks: { onChange?: (held: number) => void; onCut?: (reason: CutReason) => void },
    private readonly now: () => number,
  ) {
    this.largeLimit = Math.floor(settings.budgetBytes * LARGE_SHARE);
  }

  reserve(bytes: number, address: string, cut: (reason: CutReason) => void): BodyHold | undefined {
    if (!this.fits(bytes, this.heldBy(address))) {
      const chosen = this.victims(bytes, address);
      if (chosen.length === 0) return undefined;
      for (const hold of chosen) this.cutOff(hold, 'preempted');
    }
    const hold: Hold = { bytes, large: bytes > SMALL_BODY_BYTES, address, startedAt: this.now(), arrived: 0, cut };
    this.holds.add(hold);
    this.total += bytes;
    if (hold.large) this.large += bytes;
    this.byAddress.set(address, (this.byAddress.get(address) ?? 0) + bytes);
    this.timer ??= setInterval(() => this.sweep(), SWEEP_INTERVAL_MS).unref();
    this.hooks.onChange?.(this.total);
    return {
      received: (n) => void (hold.arrived += n),
      complete: () => void (hold.arrived = hold.bytes),
      release: () => this.remove(hold),
    };
  }

  held(): number {
    return this.total;
  }

  largestBody(): number {
    return Math.min(this.settings.perAddressBytes, Math.max(this.largeLimit, Math.min(SMALL_BODY_BYTES, this.settings.budgetBytes)));
  }

  sweep(): void {
    const at = this.now();
    for (const hold of [...this.holds])
      if (at - hold.startedAt >= this.settings.graceMs && this.behind(hold, at)) this.cutOff(hold, 'slow');
  }

  private heldBy(address: string): Held {
    return { total: this.total, large: this.large, address: this.byAddress.get(address) ?? 0 };
  }

  /** Which of the three bounds `bytes` more would break, given what is held. */
  private over(bytes: number, held: Held) {
    return {
      total: held.total + bytes > this.settings.budgetBytes,
      large: bytes > SMALL_BODY_BYTES && held.large + bytes > this.largeLimit,
      address: held.address + bytes > this.settings.perAddressBytes,
    };
  }

  private fits(bytes: number, held: Held): boolean {
    const over = this.over(bytes, held);
    return !over.total && !over.large && !over.address;
  }

  private behind(hold: Hold, at: number): boolean {
    return hold.arrived < expectedBytes(at - hold.startedAt, hold.bytes, this.settings.minBytesPerSecond);
  }

  /** The slow bodies whose cut would make room for `bytes` from `address`, slowest first; empty when none would. */
  private victims(bytes: number, address: string): Hold[] {
    const at = this.now();
    const rate = (hold: Hold) => hold.arrived / (at - hold.startedAt);
    const slow = [...this.holds]
      .filter((h) => at - h.startedAt >= PREEMPT_AFTER_MS && this.behind(h, at))
      .sort((a, b) => rate(a) - rate(b));
    const held = this.heldBy(address);
    const chosen: Hold[] = [];
    for (const hold of slow) {
      if (this.fits(bytes, held)) break;
      const over = this.over(bytes, held);
      // Only a cut that eases a bound this body breaks: never one of another address for this address's share.
      if (!over.total && !(over.large && hold.large) && !(over.address && hold.address === address)) continue;
      chosen.push(hold);
      held.total -= hold.bytes;
      if (hold.large) held.large -= hold.bytes;
      if (hold.address === address) held.address -= hold.bytes;
    }
    return this.fits(bytes, held) ? chosen : [];
  }

  private cutOff(hold: Hold, reason: CutReason): void {
    this.remove(hold);
    this.hooks.onCut?.(reason);
    hold.cut(reason);
  }

  private remove(hold: Hold): void {
    if (!this.holds.delete(hold)) return;
    this.total -= hold.bytes;
    if (hold.large) this.large -= hold.bytes;
    const left = (this.byAddress.get(hold.address) ?? 0) - hold.bytes;
    if (left > 0) this.byAddress.set(hold.address, left);
    else this.byAddress.delete(hold.address);
    if (this.holds.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
    this.hooks.onChange?.(this.total);
  }
}

export function createUnauthenticatedBudget(
  settings: UnauthenticatedBudgetSettings,
  hooks: { onChange?: (held: number) => void; onCut?: (reason: CutReason) => void; now?: () => number } = {},
): UnauthenticatedBudget {
  return new HeldBodyBudget(settings, hooks, hooks.now ?? Date.now);
}
