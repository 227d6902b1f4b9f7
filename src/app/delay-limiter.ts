/**
 * Admission by measured delay, per API process: how much new work the process lets through to the
 * engine while the engine falls behind, and how that is shared between organizations. Pure and
 * clock-injected.
 *
 * - **Saturation.** The engine is saturated while its measured delay (src/app/engine-delay.ts) is
 *   past its target and rising, or standing still at twice its target or more. Under the target
 *   it has room; past it and falling, it is catching up. Work is limited only from the moment it
 *   saturates.
 *   A delay that stands far past the target is saturation too: the engine then serves what it is
 *   fed, but every call waits that long (a standing queue of 10 s was measured behind the heartbeat
 *   bench, five times the 2 s a start may take), so the queue must drain, not merely stop growing.
 * - **Measured throughput.** What the engine completes, in requests a second (`measuredThroughput`):
 *   the oldest waiting request was admitted `delay` ago, and a queue whose head ages by g seconds
 *   each second moves through that work at (1 − g) of the rate it was admitted at then. So this is
 *   the engine's pace whatever the work costs it, with no model of that cost.
 * - **The limit** is that throughput, set when the engine saturates and following it from then on
 *   while the delay is past its target, less what drains the part of the delay past the target
 *   within DRAIN_HORIZON_MS (`drainShare`); under the target it is off. It is never a fraction of
 *   a limit already cut: a lone organization is held at the engine's pace, not below it, with
 *   the engine's delay about its target rather than wherever the flood first pushed it.
 * - **The shares**: the limit is divided between the organizations that ask, by weighted max-min
 *   fairness on what each asked over the last interval, and each gets at least its weighted part of
 *   it. An organization asking within its weighted part of the engine's throughput is never
 *   refused; one that was not asking (new, or idle) gets that part from its first request.
 * - **Enforcement** is a token bucket per limited organization, checked in memory.
 */

/** A delay growing by this much a second (ms per s) or more is rising; less is noise or a stable queue. */
const RISING_MS_PER_S = 50;
/** The growth is measured over this many readings back (two intervals): one slow reading is not a trend. */
const TREND_READINGS = 3;
/** However fast the delay grows, the engine is taken to serve at least this fraction of what it is fed. */
const MIN_SERVED = 0.05;
/**
 * The part of the delay past the target is drained within this long: the limit is the throughput
 * less that backlog spread over it. Long enough that a small overshoot costs the senders little,
 * short enough that a standing queue is gone before a lease's margin (2 s at the least) is spent
 * many times over.
 */
const DRAIN_HORIZON_MS = 5_000;
/** A delay standing still (neither rising nor falling) saturates the engine once it is this many times its target. */
const STANDING_FACTOR = 2;
/** Under the target again, the limit grows by this factor an interval until it covers what is asked. */
const RELEASE_STEP = 1.25;
/** While draining, at least this share of the measured throughput is still admitted: new work is slowed, never stopped. */
const MIN_DRAIN_SHARE = 0.1;
/** The limit is the median of this many interval estimates of the throughput: one odd reading moves nothing. */
const ESTIMATES = 5;
/** At least this many requests a second for each organization of weight 1 that asks. */
const FLOOR_PER_WEIGHT = 1;
/** The longest wait a refusal names. */
const MAX_RETRY_AFTER_SECONDS = 60;
/** Organizations unheard of this long are forgotten. */
const IDLE_MS = 60_000;

export interface DelayLimiterSettings {
  /** ADMISSION_DELAY_TARGET. */
  targetMs: number;
  /** ENGINE_DELAY_INTERVAL: how often the delay is read and the limit moves. */
  intervalMs: number;
}

interface TenantState {
  weight: number;
  /** Requests decided this interval (admitted or refused), and admitted. */
  asked: number;
  admitted: number;
  /** Last interval's, per second. */
  askedRate: number;
  admittedRate: number;
  /** Requests a second this organization may have while the limit is on. */
  share: number;
  tokens: number;
  refilledAt: number;
  lastSeen: number;
}

interface Reading {
  at: number;
  delayMs: number;
}

/** What this process admitted over one interval, in requests a second. */
interface AdmittedSpan {
  from: number;
  to: number;
  perSecond: number;
}

/** How far back admitted rates are kept: the delay the throughput can still be measured across. */
const HISTORY_MS = 10 * 60_000;

export type DelayVerdict = { ok: true } | { ok: false; retryAfterSeconds: number };

/** Weighted max-min fairness: each demand met up to the water level, the level set so the shares sum to `limit`. */
export function weightedShares(limit: number, demands: readonly { demand: number; weight: number }[]): number[] {
  const shares = demands.map(() => 0);
  let left = limit;
  let open = demands.map((_, i) => i);
  while (open.length > 0 && left > 1e-9) {
    const weights = open.reduce((sum, i) => sum + demands[i]!.weight, 0);
    const level = left / weights;
    const met = open.filter((i) => demands[i]!.demand - shares[i]! <= level * demands[i]!.weight);
    if (met.length === 0) {
      for (const i of open) shares[i]! += level * demands[i]!.weight;
      return shares;
    }
    for (const i of met) {
      left -= demands[i]!.demand - shares[i]!;
      shares[i] = demands[i]!.demand;
    }
    open = open.filter((i) => !met.includes(i));
  }
  return shares;
}

/** How fast the delay grew over `readings` (oldest first), in ms per second; 0 with fewer than two. */
export function delayGrowth(readings: readonly Pick<Reading, 'at' | 'delayMs'>[]): number {
  const first = readings[0];
  const last = readings[readings.length - 1];
  if (!first || !last || last.at <= first.at) return 0;
  return ((last.delayMs - first.delayMs) * 1000) / (last.at - first.at);
}

/**
 * The engine's pace in requests a second, from the last readings (oldest first) and the history of
 * what was admitted. The oldest waiting request was admitted `delay` ago; first in first out, the
 * head of the queue moves through work admitted at that time's rate, so the queue is served at
 * that rate times one less the delay's growth a second (a falling delay: more than it). At least
 * MIN_SERVED of it.
 */
export function measuredThroughput(readings: readonly Reading[], admittedAt: (at: number) => number): number {
  const last = readings[readings.length - 1];
  if (!last) return 0;
  const served = 1 - delayGrowth(readings) / 1000;
  return admittedAt(last.at - last.delayMs) * Math.max(MIN_SERVED, served);
}

/**
 * The share of the measured throughput to admit at `delayMs`: all of it at the target, less the
 * part that drains the excess within DRAIN_HORIZON_MS (a queue `excess` long holds `excess`
 * seconds of throughput), and never under MIN_DRAIN_SHARE.
 */
export function drainShare(delayMs: number, targetMs: number): number {
  const excess = Math.max(0, delayMs - targetMs);
  return Math.max(MIN_DRAIN_SHARE, 1 - excess / DRAIN_HORIZON_MS);
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};

export class DelayLimiter {
  private readonly tenants = new Map<string, TenantState>();
  /** Requests a second of new work, every organization together; undefined while off. */
  private limit: number | undefined;
  /** The engine's measured throughput the limit was drawn from: each organization's weighted part is of this, not of the drained limit. */
  private throughput = 0;
  private readonly readings: Reading[] = [];
  private readonly admitted: AdmittedSpan[] = [];
  /** The last few estimates of the engine's throughput, while the delay is past its target. */
  private readonly estimates: number[] = [];
  private lastUpdate: number | undefined;
  /** When the limit was last set by a cut: the next cut waits until the trend holds only readings since. */
  private lastCut = Number.NEGATIVE_INFINITY;

  constructor(private readonly settings: DelayLimiterSettings) {}

  /** The limit now (undefined: off), for metrics and tests. */
  get currentLimit(): number | undefined {
    return this.limit;
  }

  /** The weight this process last saw for `tenant` (1 for one it has not seen). */
  weightOf(tenant: string): number {
    return this.tenants.get(tenant)?.weight ?? 1;
  }

  /** Whether `tenant` may have one more request now, without taking it (an early, I/O-free refusal). */
  check(tenant: string, weight: number, now: number): DelayVerdict {
    const state = this.state(tenant, weight, now);
    if (this.limit === undefined) return { ok: true };
    this.refill(state, now);
    if (state.tokens >= 1) return { ok: true };
    state.asked += 1;
    return this.refusal(state);
  }

  /** Takes one request of `tenant`, or refuses it with the wait until its bucket has one again. */
  take(tenant: string, weight: number, now: number): DelayVerdict {
    const state = this.state(tenant, weight, now);
    state.asked += 1;
    if (this.limit !== undefined) {
      this.refill(state, now);
      if (state.tokens < 1) return this.refusal(state);
      state.tokens -= 1;
    }
    state.admitted += 1;
    return { ok: true };
  }

  /** One interval's step, with the delay measured (undefined: nobody measured lately, nothing moves but the rates). */
  update(delayMs: number | undefined, now: number): void {
    const seconds = this.lastUpdate === undefined ? this.settings.intervalMs / 1000 : Math.max(0.001, (now - this.lastUpdate) / 1000);
    this.lastUpdate = now;
    let admitted = 0;
    for (const [tenant, state] of this.tenants) {
      state.askedRate = state.asked / seconds;
      state.admittedRate = state.admitted / seconds;
      state.asked = 0;
      state.admitted = 0;
      admitted += state.admittedRate;
      if (now - state.lastSeen > IDLE_MS) this.tenants.delete(tenant);
    }
    this.admitted.push({ from: now - seconds * 1000, to: now, perSecond: admitted });
    while (this.admitted.length > 1 && this.admitted[0]!.to < now - HISTORY_MS) this.admitted.shift();
    if (delayMs !== undefined) {
      this.readings.push({ at: now, delayMs });
      if (this.readings.length > TREND_READINGS) this.readings.shift();
      this.move(delayMs, now);
    }
    this.share(now);
  }

  /**
   * Off under the target. Past it, the limit is set once the engine saturates (the delay rising or
   * standing; one falling is catching up on its own), and from then on follows the measured
   * throughput each interval, less what drains the delay back to the target (`drainShare`),
   * except while a cut is still settling.
   */
  private move(delayMs: number, now: number): void {
    if (delayMs <= this.settings.targetMs) {
      this.release();
      return;
    }
    this.estimates.push(measuredThroughput(this.readings, (at) => this.admittedAt(at)));
    if (this.estimates.length > ESTIMATES) this.estimates.shift();
    const growth = this.readings.length >= 2 ? delayGrowth(this.readings) : 0;
    const rising = growth >= RISING_MS_PER_S;
    const falling = growth <= -RISING_MS_PER_S;
    // One reading shows no trend yet; a falling delay is the engine catching up on its own; a
    // standing one is cut only once it stands STANDING_FACTOR times past the target, so a busy
    // engine's noise about its target refuses nobody.
    const standing = !rising && !falling && delayMs > this.settings.targetMs * STANDING_FACTOR;
    if (this.limit === undefined && (this.readings.length < 2 || !(rising || standing))) return;
    // The work admitted before a cut still ages the queue: the trend speaks for the cut only once
    // every reading it holds came after it.
    const settling = this.readings[0]!.at <= this.lastCut;
    if (this.limit !== undefined && settling) return;
    if (this.limit === undefined || rising) this.lastCut = now;
    this.throughput = Math.max(this.floor(), median(this.estimates));
    this.limit = Math.max(this.floor(), this.throughput * drainShare(delayMs, this.settings.targetMs));
  }

  /**
   * Under the target again, the limit is lifted to the engine's measured throughput, then by
   * RELEASE_STEP an interval, and goes once it covers everything asked: switched off at once, a
   * flood held back would all come in before the delay (the age of the oldest waiting request)
   * shows it, and fill the queue again.
   */
  private release(): void {
    this.estimates.length = 0;
    if (this.limit === undefined) return;
    let asked = 0;
    for (const state of this.tenants.values()) asked += state.askedRate;
    // From the engine's measured pace at once: under the target, the engine keeps up with that much.
    this.limit = Math.max(this.limit * RELEASE_STEP, this.throughput);
    if (this.limit < asked) return;
    this.limit = undefined;
    this.throughput = 0;
  }

  /** What this process admitted a second around `at` (the oldest or newest interval kept, outside them). */
  private admittedAt(at: number): number {
    const span = this.admitted.find((s) => at < s.to) ?? this.admitted[this.admitted.length - 1];
    return span?.perSecond ?? 0;
  }

  private floor(): number {
    let weights = 0;
    for (const state of this.tenants.values()) if (state.askedRate > 0) weights += state.weight;
    return Math.max(FLOOR_PER_WEIGHT, weights * FLOOR_PER_WEIGHT);
  }

  /**
   * Splits the limit by weighted max-min fairness on what each organization asked last interval.
   * One that asks no more than its weighted part of the engine's measured throughput gets that part
   * whole, drained or not, and so is never refused however its requests fall within a second; the
   * others share what the limit leaves, and only they wait for the delay to drain.
   */
  private share(now: number): void {
    if (this.limit === undefined) return;
    const states = [...this.tenants.values()];
    const shares = weightedShares(
      this.limit,
      states.map((s) => ({ demand: s.askedRate, weight: s.weight })),
    );
    const weights = states.reduce((sum, s) => sum + (s.askedRate > 0 ? s.weight : 0), 0);
    states.forEach((state, i) => {
      this.refill(state, now);
      const part = weights > 0 ? (this.throughput * state.weight) / weights : this.throughput;
      const within = state.askedRate <= part;
      state.share = Math.max(shares[i]!, within ? part : 0, FLOOR_PER_WEIGHT * state.weight);
      state.tokens = Math.min(state.tokens, this.burst(state));
    });
  }

  private state(tenant: string, weight: number, now: number): TenantState {
    let state = this.tenants.get(tenant);
    if (!state) {
      const share = this.newcomerShare(weight);
      state = {
        weight,
        asked: 0,
        admitted: 0,
        askedRate: 0,
        admittedRate: 0,
        share,
        tokens: Math.max(1, share),
        refilledAt: now,
        lastSeen: now,
      };
      this.tenants.set(tenant, state);
    }
    state.weight = weight;
    state.lastSeen = now;
    return state;
  }

  /**
   * What an organization not seen asking gets until the next interval shares the limit again: its
   * weighted part of the limit beside the ones asking, as `share` would give it, so a quiet
   * organization's first requests are never refused while a flooder is held.
   */
  private newcomerShare(weight: number): number {
    if (this.limit === undefined) return FLOOR_PER_WEIGHT * weight;
    let weights = weight;
    for (const state of this.tenants.values()) if (state.askedRate > 0) weights += state.weight;
    return Math.max(FLOOR_PER_WEIGHT * weight, (this.throughput * weight) / weights);
  }

  /** At most one second of its share, and at least one request. */
  private burst(state: TenantState): number {
    return Math.max(1, state.share);
  }

  private refill(state: TenantState, now: number): void {
    state.tokens = Math.min(this.burst(state), state.tokens + (state.share * Math.max(0, now - state.refilledAt)) / 1000);
    state.refilledAt = now;
  }

  /**
   * The wait a refusal names: until the organization's bucket has a request again, and at least
   * as long as its share takes to serve what it asked in a second. Senders that honour it then
   * spread out instead of all coming back when the next token is due, when all but one would be
   * refused again.
   */
  private refusal(state: TenantState): DelayVerdict {
    const share = Math.max(state.share, 1e-3);
    const wait = Math.max((1 - state.tokens) / share, state.askedRate / share);
    return { ok: false, retryAfterSeconds: Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, Math.ceil(wait))) };
  }
}
