/** Unit tests of admission by measured delay (src/app/delay-limiter.ts) and of the delay's measure (src/app/engine-delay.ts). */
import { DELAY_DECREASE, DelayLimiter, weightedShares } from '../../src/app/delay-limiter';
import { LagRecorder, quantile } from '../../src/app/engine-delay';

const INTERVAL = 1000;
const TARGET = 200;

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

describe('the delay limiter', () => {
  it('limits nothing while the delay stays under the target', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    for (let t = 0; t < 5; t++) {
      expect(send(limiter, 'a', 100, t * INTERVAL)).toBe(100);
      limiter.update(50, (t + 1) * INTERVAL);
    }
    expect(limiter.currentLimit).toBeUndefined();
  });

  it('past the target cuts the limit to a fraction of what was admitted, the flooder first, never the quiet one under its share', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    send(limiter, 'a', 90, 0);
    send(limiter, 'b', 10, 0);
    limiter.update(500, INTERVAL);
    expect(limiter.currentLimit).toBeCloseTo(100 * DELAY_DECREASE);
    // The quiet organization keeps all it asked; the flooder gets the rest.
    let t = INTERVAL;
    for (let i = 0; i < 6; i++, t += INTERVAL) {
      expect(send(limiter, 'b', 10, t)).toBe(10);
      expect(send(limiter, 'a', 500, t)).toBeLessThanOrEqual(Math.ceil(limiter.currentLimit! - 10) + 1);
      limiter.update(500, t + INTERVAL);
    }
    // Still past the target, cut again every other interval: the flooder is at the floor, the quiet one untouched.
    expect(limiter.currentLimit).toBeLessThan(100 * DELAY_DECREASE ** 3);
    expect(send(limiter, 'b', 10, t)).toBe(10);
  });

  it('gives an organization that starts asking while the limit is on its weighted part at once, not the floor', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    send(limiter, 'a', 100, 0);
    limiter.update(500, INTERVAL);
    const limit = limiter.currentLimit!;
    expect(limit).toBeCloseTo(100 * DELAY_DECREASE);
    // Its weighted part beside the flooder is half the limit: a burst of that many within its first second all pass.
    const part = Math.floor(limit / 2);
    expect(part).toBeGreaterThan(5);
    let admitted = 0;
    for (let i = 0; i < part; i++) if (limiter.take('newcomer', 1, INTERVAL + i).ok) admitted++;
    expect(admitted).toBe(part);
  });

  it('a refusal names how long until the organization has a request again, and check() takes nothing', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    send(limiter, 'a', 10, 0);
    limiter.update(1000, INTERVAL);
    send(limiter, 'a', 50, INTERVAL);
    const refused = limiter.take('a', 1, INTERVAL * 2 - 1);
    expect(refused).toEqual({ ok: false, retryAfterSeconds: expect.any(Number) });
    expect((refused as { retryAfterSeconds: number }).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    const other = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    send(other, 'a', 10, 0);
    other.update(1000, INTERVAL);
    for (let i = 0; i < 100; i++) expect(other.check('a', 1, INTERVAL + 500).ok).toBe(true);
  });

  it('names a longer wait the further an organization asks beyond its share, so senders that honour it spread out', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    send(limiter, 'a', 20, 0);
    limiter.update(1000, INTERVAL);
    // Its share is now 14 a second; it asks 280 a second (20 times that).
    send(limiter, 'a', 280, INTERVAL);
    limiter.update(1000, INTERVAL * 2);
    expect(send(limiter, 'a', 100, INTERVAL * 2)).toBeLessThan(100);
    const refused = limiter.take('a', 1, INTERVAL * 3 - 1);
    expect(refused.ok).toBe(false);
    expect((refused as { retryAfterSeconds: number }).retryAfterSeconds).toBeGreaterThanOrEqual(15);
    expect((refused as { retryAfterSeconds: number }).retryAfterSeconds).toBeLessThanOrEqual(60);
  });

  it('does not cut again while the delay is falling, grows back additively under the target, then switches off', () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    send(limiter, 'a', 100, 0);
    limiter.update(1000, INTERVAL);
    const first = limiter.currentLimit!;
    send(limiter, 'a', 100, INTERVAL);
    limiter.update(1000, 2 * INTERVAL);
    send(limiter, 'a', 100, 2 * INTERVAL);
    // Two intervals later, but the delay fell by more than a tenth: the work before the cut is still draining.
    limiter.update(800, 3 * INTERVAL);
    expect(limiter.currentLimit).toBe(first);
    let t = 3 * INTERVAL;
    const limits: number[] = [];
    for (let i = 0; i < 200 && limiter.currentLimit !== undefined; i++, t += INTERVAL) {
      send(limiter, 'a', 40, t);
      limiter.update(100, t + INTERVAL);
      if (limiter.currentLimit !== undefined) limits.push(limiter.currentLimit);
    }
    // Raised by the same step each interval, and switched off once it binds nothing (twice what is asked).
    const steps = limits.slice(1).map((v, i) => Math.round((v - limits[i]!) * 1000) / 1000);
    expect(new Set(steps).size).toBe(1);
    expect(limiter.currentLimit).toBeUndefined();
  });

  it("gives an organization its weight's part", () => {
    const limiter = new DelayLimiter({ targetMs: TARGET, intervalMs: INTERVAL });
    send(limiter, 'heavy', 200, 0, 2);
    send(limiter, 'light', 200, 0, 1);
    limiter.update(1000, INTERVAL);
    const heavy = send(limiter, 'heavy', 400, INTERVAL, 2);
    const light = send(limiter, 'light', 400, INTERVAL, 1);
    expect(heavy / light).toBeGreaterThan(1.7);
    expect(heavy / light).toBeLessThan(2.3);
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
