/** The pure rules of admission and fairness, tested directly. */
import { retryAfterSeconds, unitsPerWindow } from '../../src/app/admission';
import { windowStart } from '../../src/app/store/window-counter';
import { clampWeight, fairnessKey, tenantClass } from '../../src/app/temporal/fairness';

describe('admission windows', () => {
  it('fixes windows on the epoch and allows rate × window units, at least one', () => {
    expect(windowStart(12_345, 1000)).toBe(12_000);
    expect(windowStart(19_999, 10_000)).toBe(10_000);
    expect(unitsPerWindow({ ratePerSecond: 50, windowMs: 1000 })).toBe(50);
    expect(unitsPerWindow({ ratePerSecond: 1, windowMs: 10_000 })).toBe(10);
    expect(unitsPerWindow({ ratePerSecond: 1, windowMs: 100 })).toBe(1);
  });

  it("scales an organization's units by its weight, at least one", () => {
    expect(unitsPerWindow({ ratePerSecond: 50, windowMs: 1000 }, 2)).toBe(100);
    expect(unitsPerWindow({ ratePerSecond: 50, windowMs: 10_000 }, 0.01)).toBe(5);
    expect(unitsPerWindow({ ratePerSecond: 50, windowMs: 1000 }, 0.001)).toBe(1);
  });

  it('tells a shed sender to come back when the next window opens, never in less than a second', () => {
    expect(retryAfterSeconds(12_900, 1000)).toBe(1);
    expect(retryAfterSeconds(10_001, 10_000)).toBe(10);
    expect(retryAfterSeconds(19_500, 10_000)).toBe(1);
  });
});

describe('fairness', () => {
  it('clamps weights to what Temporal accepts and classes them for metrics', () => {
    expect(clampWeight(0)).toBe(0.001);
    expect(clampWeight(5000)).toBe(1000);
    expect(clampWeight(2)).toBe(2);
    expect([tenantClass(1), tenantClass(2), tenantClass(0.5)]).toEqual(['default', 'raised', 'lowered']);
  });

  it('keeps keys within 64 bytes', () => {
    expect(fairnessKey('org_01j')).toBe('org_01j');
    expect(Buffer.byteLength(fairnessKey('x'.repeat(100)))).toBe(64);
  });
});
