/** The reconcile's pure rules: the listing's windows and cursors, which deliveries to ask for again and how often, drift. */
import type { HookDelivery } from '../../src/github/api';
import {
  DELIVERY_LOG_WINDOW_MS,
  DELIVERY_WINDOW_OVERLAP_MS,
  attemptClass,
  decideRedelivery,
  dropCarried,
  headDrifted,
  isShedAnswer,
  listingPlan,
  newestAttempts,
  nextListingState,
} from '../../src/github/reconcile-rules';

let nextId = 1;
const attempt = (guid: string, statusCode: number, redelivery = false): HookDelivery => ({
  id: nextId++,
  guid,
  deliveredAt: new Date().toISOString(),
  redelivery,
  statusCode,
  event: 'push',
});

describe('the listing window', () => {
  const now = Date.parse('2026-11-24T00:00:00Z');

  it('overlaps the previous listing, never reaching further back than GitHub keeps deliveries', () => {
    expect(listingPlan({ lastRunAt: now - 600_000, carried: null }, now)).toEqual({
      carried: null,
      topUntilMs: now - 600_000 - DELIVERY_WINDOW_OVERLAP_MS,
    });
    expect(listingPlan({ lastRunAt: now - 10 * DELIVERY_LOG_WINDOW_MS, carried: null }, now).topUntilMs).toBe(now - DELIVERY_LOG_WINDOW_MS);
    expect(listingPlan({ carried: null }, now).topUntilMs).toBe(now - DELIVERY_LOG_WINDOW_MS);
  });

  it('a listing the page cap stopped is carried with its bound, and the top waits until it is done', () => {
    const state = { lastRunAt: now - 600_000, carried: null };
    const plan = listingPlan(state, now);
    const capped = nextListingState(state, plan, { startedAt: now, top: { next: 'v1_300' } });
    // The top was read down to the cursor: the next run starts there, and goes on to the old bound.
    expect(capped).toEqual({ lastRunAt: now, carried: { cursor: 'v1_300', untilMs: plan.topUntilMs } });

    const later = now + 600_000;
    const plan2 = listingPlan(capped, later);
    expect(plan2.carried).toEqual({ cursor: 'v1_300', untilMs: plan.topUntilMs });
    // Still not done: the bound stays, the top is not moved.
    expect(nextListingState(capped, plan2, { startedAt: later, carried: { next: 'v1_200' } })).toEqual({
      lastRunAt: now,
      carried: { cursor: 'v1_200', untilMs: plan.topUntilMs },
    });
    // Done, then the top read whole: nothing carried.
    expect(nextListingState(capped, plan2, { startedAt: later, carried: { next: null }, top: { next: null } })).toEqual({
      lastRunAt: later,
      carried: null,
    });
    // Done, but no page left for the top this time: the top stays where it was.
    expect(nextListingState(capped, plan2, { startedAt: later, carried: { next: null } })).toEqual({ lastRunAt: now, carried: null });
  });

  it('a carried cursor GitHub refuses makes the next top walk reach down to its bound', () => {
    const state = { lastRunAt: now, carried: { cursor: 'v1_9', untilMs: now - 3_600_000 } };
    const dropped = dropCarried(state);
    expect(dropped.carried).toBeNull();
    expect(listingPlan(dropped, now + 1).topUntilMs).toBe(now - 3_600_000);
  });
});

describe('which deliveries are asked for again', () => {
  it('classifies attempts by what answered them', () => {
    expect([202, 200, 503, 500, 0, 400, 401, 413].map(attemptClass)).toEqual([
      'delivered',
      'delivered',
      'server_error',
      'server_error',
      'unreachable',
      'refused',
      'refused',
      'refused',
    ]);
    expect(isShedAnswer(503, '{"error":"overloaded"}')).toBe(true);
    expect(isShedAnswer(503, '{"error":"busy","message":"x"}')).toBe(true);
    expect(isShedAnswer(503, '{"error":"unavailable","dependency":"temporal"}')).toBe(false);
    expect(isShedAnswer(500, '{"error":"overloaded"}')).toBe(false);
  });

  it('groups a GUID’s attempts: its newest, and whether any was delivered', () => {
    const a1 = attempt('a', 503);
    const b = attempt('b', 202);
    const a2 = attempt('a', 0, true);
    const groups = newestAttempts([a2, b, a1]);
    expect(groups.get('a')).toEqual({ newest: a2, delivered: false });
    expect(groups.get('b')).toEqual({ newest: b, delivered: true });
  });

  const fresh = (statusCode: number, id = 10) => ({ newest: { id, statusCode }, delivered: false, shed: false });

  it('asks for a 5xx, a timeout or a connection error; never a 4xx, never a delivered GUID', () => {
    expect(decideRedelivery(undefined, fresh(500), 3)).toEqual({ action: 'ask', attemptId: 10, counted: true });
    expect(decideRedelivery(undefined, fresh(0), 3)).toEqual({ action: 'ask', attemptId: 10, counted: true });
    expect(decideRedelivery(undefined, fresh(401), 3)).toEqual({ action: 'none' });
    expect(decideRedelivery(undefined, { ...fresh(503), delivered: true }, 3)).toEqual({ action: 'none' });
  });

  it('asks once per failed attempt, stops at the cap, and does not count our own shed answers', () => {
    const record = { lastAttemptId: 10, askedAttemptId: 10, tries: 1, outcome: 'asked' as const };
    // The same attempt seen again (the windows overlap): nothing.
    expect(decideRedelivery(record, fresh(500, 10), 2)).toEqual({ action: 'none' });
    // Its redelivery failed too: asked again, counted.
    expect(decideRedelivery(record, fresh(500, 11), 2)).toEqual({ action: 'ask', attemptId: 11, counted: true });
    // At the cap: given up.
    expect(decideRedelivery({ ...record, tries: 2 }, fresh(500, 12), 2)).toEqual({ action: 'record', outcome: 'capped' });
    // A 503 overloaded or busy is ours: asked again without counting, even at the cap.
    expect(decideRedelivery({ ...record, tries: 2 }, { ...fresh(503, 12), shed: true }, 2)).toEqual({
      action: 'ask',
      attemptId: 12,
      counted: false,
    });
    // Delivered since: recorded so.
    expect(decideRedelivery(record, { ...fresh(202, 11), delivered: true }, 2)).toEqual({ action: 'record', outcome: 'delivered' });
  });

  it('an ask GitHub failed to take (a 422, a 5xx) is asked again next run, each failure a try, until the cap gives it up', () => {
    const record = { lastAttemptId: 10, askedAttemptId: 10, tries: 1, outcome: 'ask_failed' as const };
    expect(decideRedelivery(record, fresh(500, 10), 2)).toEqual({ action: 'ask', attemptId: 10, counted: true });
    expect(decideRedelivery({ ...record, tries: 2 }, fresh(500, 10), 2)).toEqual({ action: 'record', outcome: 'capped' });
    // Even for our own shed answer: failed asks count, so GitHub refusing for ever cannot keep a GUID asked for ever.
    expect(decideRedelivery({ ...record, tries: 2 }, { ...fresh(503, 10), shed: true }, 2)).toEqual({
      action: 'record',
      outcome: 'capped',
    });
  });

  it('an ask the run could not make (its cap, the budget, a limit) is made by a later run, counted as it would have been', () => {
    const record = { lastAttemptId: 10, askedAttemptId: null, tries: 0, outcome: 'waiting' as const };
    expect(decideRedelivery(record, fresh(500, 10), 2)).toEqual({ action: 'ask', attemptId: 10, counted: true });
    expect(decideRedelivery(record, { ...fresh(503, 10), shed: true }, 2)).toEqual({ action: 'ask', attemptId: 10, counted: false });
    expect(decideRedelivery({ ...record, tries: 2 }, fresh(500, 10), 2)).toEqual({ action: 'record', outcome: 'capped' });
    // A newer attempt in the log (delivered since, say) decides instead.
    expect(decideRedelivery(record, { ...fresh(200, 11), delivered: true }, 2)).toEqual({ action: 'record', outcome: 'delivered' });
  });
});

describe('headDrifted', () => {
  it('drifted only when the head is neither synced nor waiting', () => {
    expect(headDrifted('a', { syncedSha: 'a', pendingSha: null })).toBe(false);
    expect(headDrifted('b', { syncedSha: 'a', pendingSha: 'b' })).toBe(false);
    expect(headDrifted('c', { syncedSha: 'a', pendingSha: 'b' })).toBe(true);
    expect(headDrifted('c', { syncedSha: null, pendingSha: null })).toBe(true);
  });
});
