/** The reconcile's pure rules: the log window, which deliveries to ask for again, drift. */
import type { HookDelivery } from '../../src/github/api';
import { DELIVERY_LOG_WINDOW_MS, branchOf, headDrifted, pickRedeliveries, reconcileSince } from '../../src/github/reconcile-rules';

let nextId = 1;
const attempt = (guid: string, statusCode: number, redelivery = false): HookDelivery => ({
  id: nextId++,
  guid,
  deliveredAt: new Date().toISOString(),
  redelivery,
  statusCode,
  event: 'push',
});

describe('reconcileSince', () => {
  const now = Date.parse('2026-11-24T00:00:00Z');
  it('reads from the last reconcile', () => expect(reconcileSince(now - 600_000, now)).toBe(now - 600_000));
  it('never further back than GitHub keeps deliveries, nor before a first run', () => {
    expect(reconcileSince(now - 10 * DELIVERY_LOG_WINDOW_MS, now)).toBe(now - DELIVERY_LOG_WINDOW_MS);
    expect(reconcileSince(undefined, now)).toBe(now - DELIVERY_LOG_WINDOW_MS);
  });
});

describe('pickRedeliveries', () => {
  it('asks once per GUID that failed on every attempt, for its newest attempt', () => {
    const a1 = attempt('a', 503);
    const b = attempt('b', 202);
    const a2 = attempt('a', 0, true);
    const c = attempt('c', 500);
    expect(pickRedeliveries([a2, c, b, a1])).toEqual([a2.id, c.id]);
  });
  it('never asks for a GUID that any attempt delivered', () => {
    expect(pickRedeliveries([attempt('d', 503), attempt('d', 202, true), attempt('d', 500, true)])).toEqual([]);
  });
  it('nothing in the log, nothing asked', () => expect(pickRedeliveries([])).toEqual([]));
});

describe('branchOf and headDrifted', () => {
  it("a target's own branch, else the last pushed one; never a tag", () => {
    expect(branchOf('refs/heads/main', 'refs/heads/dev')).toBe('refs/heads/main');
    expect(branchOf(null, 'refs/heads/dev')).toBe('refs/heads/dev');
    expect(branchOf(null, null)).toBeUndefined();
    expect(branchOf('refs/tags/v1', null)).toBeUndefined();
  });
  it('drifted only when the head is neither synced nor waiting', () => {
    expect(headDrifted('a', { syncedSha: 'a', pendingSha: null })).toBe(false);
    expect(headDrifted('b', { syncedSha: 'a', pendingSha: 'b' })).toBe(false);
    expect(headDrifted('c', { syncedSha: 'a', pendingSha: 'b' })).toBe(true);
    expect(headDrifted('c', { syncedSha: null, pendingSha: null })).toBe(true);
  });
});
