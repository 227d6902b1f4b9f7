/**
 * Admission by measured delay, per API process: how much new work the process lets through to the
 * engine while the engine falls behind, and how that is shared between organizations. Pure and
 * clock-injected.
 *
 * - **Saturation.** The engine is saturated while its measured delay (src/app/engine-delay.ts) is
 *   past its target *and* rising. Past the target but stable or falling, it keeps up at the rate
 *   admitted; under the target it has room. Work is limited only from the moment it saturates.
 * - **Measured throughput.** What the engine completes, in requests a second (`measuredThroughput`):
 *   the oldest waiting request was admitted `delay` ago, and a queue whose head ages by g seconds
 *   each second moves through that work at (1 − g) of the rate it was admitted at then. So this is
 *   the engine's pace whatever the work costs it, with no model of that cost.
 * - **The limit** is that throughput, set when the engine saturates and following it from then on
 *   while the delay is past its target; under the target it is off. It is never a fraction of a
 *   limit already cut: a lone organization is held at the engine's pace, not below it.
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

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};

export class DelayLimiter {
  private readonly tenants = new Map<string, TenantState>();
  /** Requests a second of new work, every organization together; undefined while off. */
  private limit: number | undefined;
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
   * Off under the target. Past it, the limit is set to the measured throughput once the engine
   * saturates (the delay rising), and from then on follows that throughput each interval, except
   * while a cut is still settling. Past the target but never saturated, nothing is limited.
   */
  private move(delayMs: number, now: number): void {
    if (delayMs <= this.settings.targetMs) {
      this.limit = undefined;
      this.estimates.length = 0;
      return;
    }
    this.estimates.push(measuredThroughput(this.readings, (at) => this.admittedAt(at)));
    if (this.estimates.length > ESTIMATES) this.estimates.shift();
    const rising = this.readings.length >= 2 && delayGrowth(this.readings) >= RISING_MS_PER_S;
    if (this.limit === undefined && !rising) return;
    // The work admitted before a cut still ages the queue: the trend speaks for the cut only once
    // every reading it holds came after it.
    const settling = this.readings[0]!.at <= this.lastCut;
    if (this.limit !== undefined && settling) return;
    if (this.limit === undefined || rising) this.lastCut = now;
    this.limit = Math.max(this.floor(), median(this.estimates));
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
   * Splits the limit by weighted max-min fairness on what each organization asked last interval,
   * and gives each at least its weighted part of the limit: one that asks no more than that part
   * is never refused, however its requests fall within a second.
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
      const part = weights > 0 ? (this.limit! * state.weight) / weights : this.limit!;
      state.share = Math.max(shares[i]!, part, FLOOR_PER_WEIGHT * state.weight);
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
    return Math.max(FLOOR_PER_WEIGHT * weight, (this.limit * weight) / weights);
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
