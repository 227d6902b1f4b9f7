/** The unauthenticated budget's rule, without a server: what fits, the large share, and release. */
import { createUnauthenticatedBudget, SMALL_BODY_BYTES } from '../../src/app/http/unauthenticated-budget';

const MiB = 1024 * 1024;

describe('createUnauthenticatedBudget', () => {
  it('admits bodies until the budget is full, and takes them back once each', () => {
    const seen: number[] = [];
    const budget = createUnauthenticatedBudget(4 * MiB, (held) => seen.push(held));
    const releases = [1, 2, 3, 4].map(() => budget.reserve(MiB));
    expect(releases.every(Boolean)).toBe(true);
    expect(budget.reserve(1)).toBeUndefined();
    releases[0]!();
    releases[0]!();
    expect(budget.held()).toBe(3 * MiB);
    expect(budget.reserve(MiB)).toBeDefined();
    expect(seen).toEqual([MiB, 2 * MiB, 3 * MiB, 4 * MiB, 3 * MiB, 4 * MiB]);
  });

  it('lets bodies over SMALL_BODY_BYTES hold only three quarters, leaving the rest to small ones', () => {
    const budget = createUnauthenticatedBudget(40 * MiB);
    expect(budget.largestBody()).toBe(30 * MiB);
    const large = budget.reserve(25 * MiB);
    expect(large).toBeDefined();
    expect(budget.reserve(6 * MiB)).toBeUndefined();
    expect(budget.reserve(5 * MiB)).toBeDefined();
    // The last quarter is for small bodies only.
    for (let i = 0; i < 10; i++) expect(budget.reserve(SMALL_BODY_BYTES)).toBeDefined();
    expect(budget.held()).toBe(40 * MiB);
    expect(budget.reserve(1)).toBeUndefined();
    large!();
    expect(budget.reserve(26 * MiB)).toBeUndefined();
    expect(budget.reserve(25 * MiB)).toBeDefined();
  });

  it('a budget smaller than one small body still admits small bodies that fit', () => {
    const budget = createUnauthenticatedBudget(512 * 1024);
    expect(budget.largestBody()).toBe(512 * 1024);
    expect(budget.reserve(512 * 1024)).toBeDefined();
  });
});
