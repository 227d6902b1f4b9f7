/**
 * Admission by measured delay, per API process: how much new work the process lets through to the
 * engine, and how that is shared between organizations. Pure and clock-injected.
 *
 * - **The limit** is a rate of new work (requests a second, every organization together). It is
 *   off while the engine keeps up. When the measured delay (src/app/engine-delay.ts) rises past
 *   its target, the limit starts at a fraction of what was admitted over the last interval, and
 *   while the delay stays past the target it is cut again, multiplicatively, at most every
 *   CUT_EVERY_INTERVALS intervals and not while the delay is already falling (the work admitted
 *   before the cut is still draining). Under the target it
 *   grows again, additively, and once it is twice what is asked of it, it is off again.
 * - **The shares**: the limit is divided between the organizations that ask, by weighted max-min
 *   fairness on what each asked over the last interval: an organization that asks for less than
 *   its weighted part of the limit gets all it asks, and the rest is split among the others in
 *   proportion to their weights. So the organizations using the most beyond their share are cut
 *   first, and a quiet organization under its share is never shed: one that was not asking (new,
 *   or idle) gets its weighted part of the limit from its first request.
 * - **Enforcement** is a token bucket per limited organization, checked in memory: a sender that
 *   ignores Retry-After only meets empty buckets.
 */

/** The limit is cut to this fraction of what was admitted (the first cut) or of itself (later cuts). */
export const DELAY_DECREASE = 0.7;
/** An interval after a cut whose delay fell at least this much is still draining: no new cut. */
const FALLING = 0.9;
/** Cuts are at least this many intervals apart: the delay shows a cut only once the engine works off what came before. */
const CUT_EVERY_INTERVALS = 2;
/** Each interval under the target adds this fraction of the limit the first cut set. */
const INCREASE_FRACTION = 0.05;
/** A limit this many times what every organization asks together binds nothing: it is switched off. */
const RELEASE_FACTOR = 2;
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

export class DelayLimiter {
  private readonly tenants = new Map<string, TenantState>();
  /** Requests a second of new work, every organization together; undefined while off. */
  private limit: number | undefined;
  private step = 1;
  private lastUpdate: number | undefined;
  private lastCut = Number.NEGATIVE_INFINITY;
  private delayAtCut = 0;

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
    let asked = 0;
    let admitted = 0;
    for (const [tenant, state] of this.tenants) {
      state.askedRate = state.asked / seconds;
      state.admittedRate = state.admitted / seconds;
      state.asked = 0;
      state.admitted = 0;
      asked += state.askedRate;
      admitted += state.admittedRate;
      if (now - state.lastSeen > IDLE_MS) this.tenants.delete(tenant);
    }
    if (delayMs !== undefined) this.move(delayMs, now, { asked, admitted });
    this.share(now);
  }

  private move(delayMs: number, now: number, rates: { asked: number; admitted: number }): void {
    const floor = this.floor();
    if (delayMs > this.settings.targetMs) {
      const due = now - this.lastCut >= CUT_EVERY_INTERVALS * this.settings.intervalMs;
      const draining = this.limit !== undefined && delayMs <= this.delayAtCut * FALLING;
      if (!due || draining) return;
      const base = this.limit === undefined ? rates.admitted : Math.min(this.limit, Math.max(rates.admitted, floor));
      if (this.limit === undefined) this.step = Math.max(1, base * DELAY_DECREASE * INCREASE_FRACTION);
      this.limit = Math.max(floor, base * DELAY_DECREASE);
      this.lastCut = now;
      this.delayAtCut = delayMs;
      return;
    }
    if (this.limit === undefined) return;
    this.limit += this.step * (this.settings.intervalMs / 1000);
    if (this.limit >= RELEASE_FACTOR * Math.max(rates.asked, floor)) this.limit = undefined;
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
   * organization's first requests are never refused while a flooder is being cut.
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
