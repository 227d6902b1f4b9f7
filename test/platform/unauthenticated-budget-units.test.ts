/**
 * The unauthenticated budget's rules, without a server, on an injected clock: what fits, the
 * large share, one address's share, release, and bodies cut off for arriving too slowly (after
 * their grace, or sooner when another body needs their room).
 */
import {
  createUnauthenticatedBudget,
  expectedBytes,
  PREEMPT_AFTER_MS,
  SMALL_BODY_BYTES,
  type CutReason,
  type UnauthenticatedBudgetSettings,
} from '../../src/app/http/unauthenticated-budget';

const MiB = 1024 * 1024;
const KiB = 1024;

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

/** A budget of `budgetBytes` whose addresses may each hold all of it, unless the test says otherwise. */
function budgetOf(budgetBytes: number, more: Partial<UnauthenticatedBudgetSettings> = {}, c = clock()) {
  const settings = { budgetBytes, perAddressBytes: budgetBytes, minBytesPerSecond: 64 * KiB, graceMs: 5000, ...more };
  const seen: number[] = [];
  const cuts: CutReason[] = [];
  const budget = createUnauthenticatedBudget(settings, { onChange: (held) => seen.push(held), onCut: (r) => cuts.push(r), now: c.now });
  return { budget, seen, cuts, clock: c };
}

const noCut = () => {};

describe('createUnauthenticatedBudget', () => {
  it('admits bodies until the budget is full, and takes them back once each', () => {
    const { budget, seen } = budgetOf(4 * MiB);
    const holds = [1, 2, 3, 4].map(() => budget.reserve(MiB, 'a', noCut));
    expect(holds.every(Boolean)).toBe(true);
    expect(budget.reserve(1, 'b', noCut)).toBeUndefined();
    holds[0]!.release();
    holds[0]!.release();
    expect(budget.held()).toBe(3 * MiB);
    expect(budget.reserve(MiB, 'a', noCut)).toBeDefined();
    expect(seen).toEqual([MiB, 2 * MiB, 3 * MiB, 4 * MiB, 3 * MiB, 4 * MiB]);
  });

  it('lets bodies over SMALL_BODY_BYTES hold only three quarters, leaving the rest to small ones', () => {
    const { budget } = budgetOf(40 * MiB);
    expect(budget.largestBody()).toBe(30 * MiB);
    const large = budget.reserve(25 * MiB, 'a', noCut);
    expect(large).toBeDefined();
    expect(budget.reserve(6 * MiB, 'b', noCut)).toBeUndefined();
    expect(budget.reserve(5 * MiB, 'b', noCut)).toBeDefined();
    // The last quarter is for small bodies only.
    for (let i = 0; i < 10; i++) expect(budget.reserve(SMALL_BODY_BYTES, 'c', noCut)).toBeDefined();
    expect(budget.held()).toBe(40 * MiB);
    expect(budget.reserve(1, 'd', noCut)).toBeUndefined();
    large!.release();
    expect(budget.reserve(26 * MiB, 'a', noCut)).toBeUndefined();
    expect(budget.reserve(25 * MiB, 'a', noCut)).toBeDefined();
  });

  it('a budget smaller than one small body still admits small bodies that fit', () => {
    const { budget } = budgetOf(512 * KiB);
    expect(budget.largestBody()).toBe(512 * KiB);
    expect(budget.reserve(512 * KiB, 'a', noCut)).toBeDefined();
  });

  it('lets one address hold at most its share, while other addresses still get room', () => {
    const { budget } = budgetOf(100 * MiB, { perAddressBytes: 30 * MiB });
    expect(budget.largestBody()).toBe(30 * MiB);
    expect(budget.reserve(20 * MiB, 'slow', noCut)).toBeDefined();
    expect(budget.reserve(20 * MiB, 'slow', noCut)).toBeUndefined();
    expect(budget.reserve(10 * MiB, 'slow', noCut)).toBeDefined();
    expect(budget.reserve(1, 'slow', noCut)).toBeUndefined();
    expect(budget.reserve(20 * MiB, 'github', noCut)).toBeDefined();
  });
});

describe('the minimum rate', () => {
  it('expects the rate over the whole time, never more than the body', () => {
    expect(expectedBytes(0, MiB, 64 * KiB)).toBe(0);
    expect(expectedBytes(2000, MiB, 64 * KiB)).toBe(128 * KiB);
    expect(expectedBytes(60_000, MiB, 64 * KiB)).toBe(MiB);
  });

  it('cuts off a body behind the rate once its grace has passed, and gives its bytes back', () => {
    const { budget, cuts, clock: c } = budgetOf(100 * MiB);
    const told: CutReason[] = [];
    const slow = budget.reserve(20 * MiB, 'a', (reason) => told.push(reason))!;
    const fast = budget.reserve(2 * MiB, 'b', noCut)!;
    c.advance(4000);
    slow.received(4 * KiB);
    fast.received(2 * MiB);
    budget.sweep();
    expect(told).toEqual([]);
    c.advance(1000);
    budget.sweep();
    expect(told).toEqual(['slow']);
    expect(cuts).toEqual(['slow']);
    expect(budget.held()).toBe(2 * MiB);
    // Releasing a body that was cut off gives nothing back twice.
    slow.release();
    expect(budget.held()).toBe(2 * MiB);
  });

  it('never cuts off a body that has arrived whole, however long its handler runs', () => {
    const { budget, clock: c } = budgetOf(100 * MiB);
    const told: CutReason[] = [];
    const done = budget.reserve(MiB, 'a', (reason) => told.push(reason))!;
    done.received(10 * KiB);
    done.complete();
    c.advance(60_000);
    budget.sweep();
    expect(told).toEqual([]);
    expect(budget.held()).toBe(MiB);
  });

  it('cuts off the slowest bodies, and only as many as needed, to make room for a new one', () => {
    // Five 19 MiB bodies fill the large share (three quarters of 128 MiB) but for 1 MiB.
    const { budget, cuts, clock: c } = budgetOf(128 * MiB);
    const told: string[] = [];
    const holds = [1, 2, 3, 4, 5].map((n) => budget.reserve(19 * MiB, `slow-${n}`, () => told.push(`slow-${n}`))!);
    c.advance(PREEMPT_AFTER_MS - 1);
    // Too young to be judged: the new body waits for its room.
    expect(budget.reserve(2 * MiB, 'github', noCut)).toBeUndefined();
    c.advance(1);
    holds.forEach((hold, i) => hold.received((i + 1) * 100));
    expect(budget.reserve(2 * MiB, 'github', noCut)).toBeDefined();
    expect(told).toEqual(['slow-1']);
    expect(cuts).toEqual(['preempted']);
    expect(budget.held()).toBe(4 * 19 * MiB + 2 * MiB);
  });

  it('never cuts off a body that keeps the rate to make room', () => {
    const { budget, clock: c } = budgetOf(40 * MiB);
    const told: string[] = [];
    const fast = budget.reserve(25 * MiB, 'a', () => told.push('fast'))!;
    c.advance(1000);
    fast.received(MiB);
    expect(budget.reserve(20 * MiB, 'b', noCut)).toBeUndefined();
    expect(told).toEqual([]);
  });

  it("cuts off a slow body of another address only for the budget's bounds, never for this address's share", () => {
    const { budget, clock: c } = budgetOf(100 * MiB, { perAddressBytes: 30 * MiB });
    const told: string[] = [];
    budget.reserve(25 * MiB, 'other', () => told.push('other'));
    budget.reserve(25 * MiB, 'same', () => told.push('same'));
    c.advance(1000);
    expect(budget.reserve(10 * MiB, 'same', noCut)).toBeDefined();
    expect(told).toEqual(['same']);
  });
});
