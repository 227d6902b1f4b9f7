/** Unit tests of admission by measured delay (src/app/delay-limiter.ts) and of the delay's measure (src/app/engine-delay.ts). */
import { DelayLimiter, delayGrowth, drainShare, measuredThroughput, weightedShares } from '../../src/app/delay-limiter';
import { LagRecorder, quantile } from '../../src/app/engine-delay';

const INTERVAL = 1000;
const TARGET = 2_000;

/** `n` requests of `tenant` spread over one interval from `start`; how many were admitted. */
function send(limiter: DelayLimiter, tenant: string, n: number, start: number, weight = 1): number {
  let admitted = 0;
  for (let i = 0; i < n; i++) if (limiter.take(tenant, weight, start + (i * INTERVAL) / n).ok) admitted++;
  return admitted;
}

describe('weighted max-min shares', () => {
  it('meets every demand under the water level and splits the rest by weight', () => {
    expect(
      weightedShares(30, [
        { demand: 100, weight: 1 },
        { demand: 5, weight: 1 },
      ]),
    ).toEqual([25, 5]);
    expect(
      weightedShares(30, [
        { demand: 100, weight: 2 },
        { demand: 100, weight: 1 },
      ]),
    ).toEqual([20, 10]);
    expect(
      weightedShares(30, [
        { demand: 4, weight: 1 },
        { demand: 6, weight: 1 },
      ]),
    ).toEqual([4, 6]);
    const shares = weightedShares(10, [
      { demand: 100, weight: 1 },
      { demand: 100, weight: 1 },
      { demand: 2, weight: 1 },
    ]);
    expect(shares).toEqual([4, 4, 2]);
  });
});

/**
 * An engine that serves `perSecond` requests a second, first in first out, as a Temporal task
 * queue serves its backlog; its delay is the age of the oldest request waiting.
 */
class SimulatedEngine {
  private readonly queue: number[] = [];
  private credit = 0;
  constructor(private readonly perSecond: number) {}
  feed(at: number): void {
    this.queue.push(at);
  }
  /** Serves one interval's worth and answers the delay at `now`. */
  serve(now: number, intervalMs: number): number {
    this.credit += (this.perSecond * intervalMs) / 1000;
    while (this.credit >= 1 && this.queue.length > 0) {
      this.queue.shift();
      this.credit -= 1;
    }
    if (this.queue.length === 0) this.credit = Math.min(this.credit, 1);
    return this.queue.length === 0 ? 0 : now - this.queue[0]!;
  }
}

/** Tenants asking `perSecond` each, spread over each interval, against an engine: what each got admitted, per interval. */
function drive(options: {
  limiter: DelayLimiter;
  engine: SimulatedEngine;
  intervals: number;
  tenants: Record<string, { perSecond: number; weight?: number; from?: number }>;
  /** Filled with the engine's delay at the end of each interval. */
  delays?: number[];
}): Record<string, number[]> {
  const admitted: Record<string, number[]> = Object.fromEntries(Object.keys(options.tenants).map((t) => [t, []]));
  for (let i = 0; i < options.intervals; i++) {
    const start = i * INTERVAL;
    const counts: Record<string, number> = {};
    const requests: { at: number; tenant: string; weight: number }[] = [];
    for (const [tenant, spec] of Object.entries(options.tenants)) {
      counts[tenant] = 0;
      if (i < (spec.from ?? 0)) continue;
      for (let k = 0; k < spec.perSecond; k++)
        requests.push({ at: start + (k * INTERVAL) / spec.perSecond, tenant, weight: spec.weight ?? 1 });
    }
    requests.sort((a, b) => a.at - b.at);
    for (const r of requests) {
      if (!options.limiter.take(r.tenant, r.weight, r.at).ok) continue;
      counts[r.tenant]! += 1;
      options.engine.feed(r.at);
    }
    for (const tenant of Object.keys(counts)) admitted[tenant]!.push(counts[tenant]!);
    const delay = options.engine.serve(start + INTERVAL, INTERVAL);
    options.delays?.push(delay);
    options.limiter.update(delay, start + INTERVAL);
  }
  return admitted;
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

describe('what the engine completed, measured', () => {
  it('is the rate admitted when the oldest waiting request came in, times one less the delay growth a second', () => {
    expect(delayGrowth([])).toBe(0);
    expect(
      delayGrowth([
        { at: 0, delayMs: 1000 },
        { at: 2000, delayMs: 2000 },
      ]),
    ).toBe(500);
    const readings = [
      { at: 10_000, delayMs: 1000 },
      { at: 11_000, delayMs: 1500 },
      { at: 12_000, delayMs: 2000 },
    ];
    // The oldest waiting request came in at 10 s, when 100 a second were admitted; 40 a second are now.
    const admittedAt = (at: number) => (at <= 10_500 ? 100 : 40);
    expect(measuredThroughput(readings, admittedAt)).toBeCloseTo(50);
    // A falling delay: the engine served more than it was fed.
    const falling = readings.map((r, i) => ({ ...r, delayMs: 2000 - i * 250 }));
    expect(measuredThroughput(falling, admittedAt)).toBeCloseTo(125);
  });
});

describe('the delay limiter', () => {
  it('limits nothing while the delay stays under the target', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    for (let t = 0; t < 5; t++) {
      expect(send(limiter, 'a', 100, t * INTERVAL)).toBe(100);
      limiter.update(TARGET / 2, (t + 1) * INTERVAL);
    }
    expect(limiter.currentLimit).toBeUndefined();
  });

  it('limits nothing past the target while the delay is falling: the engine is catching up at the rate admitted', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    for (let t = 0; t < 10; t++) {
      expect(send(limiter, 'a', 100, t * INTERVAL)).toBe(100);
      limiter.update(TARGET * 3 - t * 200, (t + 1) * INTERVAL);
    }
    expect(limiter.currentLimit).toBeUndefined();
  });

  it('limits a delay that stands at twice the target or more below the rate admitted, so the queue drains', () => {
    // A delay standing just past the target is a busy engine's noise: nobody is refused for it.
    const near = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    for (let t = 0; t < 10; t++) {
      send(near, 'a', 100, t * INTERVAL);
      near.update(TARGET * 1.5 + (t % 2) * 10, (t + 1) * INTERVAL);
    }
    expect(near.currentLimit).toBeUndefined();
    for (const standing of [TARGET * 2.5, TARGET * 3, TARGET * 10]) {
      const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
      for (let t = 0; t < 10; t++) {
        send(limiter, 'a', 100, t * INTERVAL);
        limiter.update(standing + (t % 2) * 10, (t + 1) * INTERVAL);
      }
      // The engine serves what it is fed (100 a second): the limit leaves less than that, the further past the target the less.
      expect({ standing, limit: limiter.currentLimit! < 100 }).toEqual({ standing, limit: true });
      expect(limiter.currentLimit! / 100).toBeCloseTo(drainShare(standing, TARGET), 1);
    }
    expect(drainShare(TARGET, TARGET)).toBe(1);
    expect(drainShare(TARGET + 2_500, TARGET)).toBe(0.5);
    expect(drainShare(TARGET * 100, TARGET)).toBe(0.1);
  });

  it('holds a lone organization at the engine’s pace, never below it, at loads users will send', () => {
    for (const [pace, asked] of [
      [50, 60],
      [50, 100],
      [50, 500],
      [200, 1_000],
    ] as const) {
      const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
      const engine = new SimulatedEngine(pace);
      const delays: number[] = [];
      const admitted = drive({ limiter, engine, intervals: 120, tenants: { a: { perSecond: asked } }, delays });
      // Once it has settled, the organization gets the engine's pace: at least 0.9 of it.
      const settled = mean(admitted.a!.slice(40));
      expect({ pace, asked, ratio: settled / pace >= 0.9 && settled / pace <= 1.25 }).toEqual({ pace, asked, ratio: true });
      // And the engine's delay stays about its target, not wherever the first burst pushed it (27 s at 500 against 50).
      expect({ pace, asked, meanDelayUnder2xTarget: mean(delays.slice(40)) <= 2 * TARGET }).toEqual({
        pace,
        asked,
        meanDelayUnder2xTarget: true,
      });
    }
  });

  it('never refuses an organization within its weighted part of the engine’s throughput while another floods', () => {
    for (const quiet of [2, 10, 20]) {
      const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
      const engine = new SimulatedEngine(50);
      const admitted = drive({
        limiter,
        engine,
        intervals: 90,
        tenants: { flood: { perSecond: 400 }, quiet: { perSecond: quiet, from: 30 } },
      });
      expect(admitted.quiet!.slice(30)).toEqual(admitted.quiet!.slice(30).map(() => quiet));
      expect(admitted.flood!.slice(20).some((n) => n < 400)).toBe(true);
    }
  });

  it('gives an organization that starts asking while the limit is on its weighted part at once, not the floor', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    drive({ limiter, engine: new SimulatedEngine(40), intervals: 20, tenants: { a: { perSecond: 200 } } });
    const limit = limiter.currentLimit!;
    expect(limit).toBeGreaterThan(10);
    // Its weighted part beside the flooder is half the limit: a burst of that many within its first second all pass.
    const part = Math.floor(limit / 2);
    let admitted = 0;
    for (let i = 0; i < part; i++) if (limiter.take('newcomer', 1, 20 * INTERVAL + i).ok) admitted++;
    expect(admitted).toBe(part);
  });

  it('a refusal names a wait of a second or more, longer the further past its share, and check() takes nothing', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    drive({ limiter, engine: new SimulatedEngine(20), intervals: 20, tenants: { a: { perSecond: 400 } } });
    expect(limiter.currentLimit).toBeDefined();
    // Within a second of its 20-a-second share, the organization that asked 400 a second is refused.
    let refused = limiter.take('a', 1, 20 * INTERVAL + 1);
    for (let i = 2; refused.ok && i < 100; i++) refused = limiter.take('a', 1, 20 * INTERVAL + i);
    expect(refused.ok).toBe(false);
    expect((refused as { retryAfterSeconds: number }).retryAfterSeconds).toBeGreaterThanOrEqual(10);
    expect((refused as { retryAfterSeconds: number }).retryAfterSeconds).toBeLessThanOrEqual(60);
    const other = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    drive({ limiter: other, engine: new SimulatedEngine(20), intervals: 20, tenants: { a: { perSecond: 400 } } });
    for (let i = 0; i < 100; i++) other.check('b', 1, 20 * INTERVAL + 500);
    expect(other.take('b', 1, 20 * INTERVAL + 501).ok).toBe(true);
  });

  it('switches off once the delay is back under the target', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    const engine = new SimulatedEngine(50);
    drive({ limiter, engine, intervals: 30, tenants: { a: { perSecond: 200 } } });
    expect(limiter.currentLimit).toBeDefined();
    // The flood stops; the backlog drains and the limit goes.
    for (let t = 30; t < 60 && limiter.currentLimit !== undefined; t++)
      limiter.update(engine.serve((t + 1) * INTERVAL, INTERVAL), (t + 1) * INTERVAL);
    expect(limiter.currentLimit).toBeUndefined();
  });

  it("gives an organization its weight's part", () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    const admitted = drive({
      limiter,
      engine: new SimulatedEngine(60),
      intervals: 90,
      tenants: { heavy: { perSecond: 400, weight: 2 }, light: { perSecond: 400, weight: 1 } },
    });
    const ratio = mean(admitted.heavy!.slice(40)) / mean(admitted.light!.slice(40));
    expect(ratio).toBeGreaterThan(1.7);
    expect(ratio).toBeLessThan(2.3);
  });
});

describe('the lag a worker publishes', () => {
  it('is the 90th percentile of the period, per task queue, and a take starts a new period', () => {
    expect(quantile([], 0.9)).toBe(0);
    expect(quantile([5], 0.9)).toBe(5);
    expect(quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9)).toBe(9);
    const recorder = new LagRecorder();
    for (let i = 1; i <= 100; i++) recorder.observe('q', i);
    recorder.observe('other', 7);
    expect(recorder.take('q')).toEqual({ lagMs: 90, samples: 100 });
    expect(recorder.take('q')).toEqual({ lagMs: 0, samples: 0 });
    expect(recorder.take('other')).toEqual({ lagMs: 7, samples: 1 });
  });

  it('keeps a bounded sample of a busy period', () => {
    const recorder = new LagRecorder();
    for (let i = 0; i < 50_000; i++) recorder.observe('q', i % 100);
    const { lagMs, samples } = recorder.take('q');
    expect(samples).toBe(50_000);
    expect(lagMs).toBeGreaterThanOrEqual(85);
    expect(lagMs).toBeLessThanOrEqual(95);
  });
});
