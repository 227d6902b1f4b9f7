/** Unit tests of the hold before a refusal of load is answered to an impatient sender (src/app/http/refusal-hold.ts). */
import { AppError, errors } from '../../src/app/errors';
import { createRefusalHold, holdMsFor } from '../../src/app/http/refusal-hold';

/** How long `hold` took, in ms. */
async function timed(promise: Promise<void>): Promise<number> {
  const started = Date.now();
  await promise;
  return Date.now() - started;
}

describe('the refusal hold', () => {
  it('holds refusals of load, at most their Retry-After, and nothing else', () => {
    expect(holdMsFor(errors.shed(5), 1000)).toBe(1000);
    expect(holdMsFor(errors.capacity(10), 1000)).toBe(1000);
    expect(holdMsFor(errors.webhook('overloaded', 503, { headers: { 'retry-after': '1' } }), 3000)).toBe(1000);
    expect(holdMsFor(errors.shed(5), 0)).toBe(0);
    expect(holdMsFor(errors.unavailable('temporal'), 1000)).toBe(0);
    expect(holdMsFor(new AppError('conflict', 409, { body: { error: 'conflict', message: 'x' } }), 1000)).toBe(0);
  });

  it('answers a first refusal at once, and holds only a sender that comes back before its Retry-After', async () => {
    let clock = 0;
    const hold = createRefusalHold(150, { now: () => clock });
    expect(await timed(hold.hold(errors.shed(2), 'impatient'))).toBeLessThan(50);
    // Back 100 ms later, within its 2 s: held.
    clock = 100;
    expect(await timed(hold.hold(errors.shed(2), 'impatient'))).toBeGreaterThanOrEqual(140);
    // Another sender of the same organization (another key, or route) is not.
    expect(await timed(hold.hold(errors.shed(2), 'honest'))).toBeLessThan(50);
    // A sender that waited its Retry-After out is answered at once again.
    clock = 100 + 2_000;
    expect(await timed(hold.hold(errors.shed(2), 'impatient'))).toBeLessThan(50);
    expect(await timed(hold.hold(errors.shed(2), 'honest'))).toBeLessThan(50);
    // Other errors are never held.
    expect(await timed(hold.hold(errors.unavailable('temporal'), 'impatient'))).toBeLessThan(50);
  });

  it('holds at most its bound at once and answers the rest at once', async () => {
    const hold = createRefusalHold(200, { maxHeld: 2 });
    // Each sender was refused once already: its next refusal is early.
    for (const sender of ['a', 'b', 'c']) await hold.hold(errors.shed(1), sender);
    const started = Date.now();
    const held = [hold.hold(errors.shed(1), 'a'), hold.hold(errors.shed(1), 'b')];
    expect(hold.held).toBe(2);
    await hold.hold(errors.shed(1), 'c');
    expect(Date.now() - started).toBeLessThan(100);
    await Promise.all(held);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(hold.held).toBe(0);
  });

  it('remembers at most its bound of senders, forgetting the oldest', async () => {
    let clock = 0;
    const hold = createRefusalHold(100, { maxSenders: 2, now: () => clock });
    for (const sender of ['a', 'b', 'c']) await hold.hold(errors.shed(5), sender);
    clock = 10;
    // 'a' was forgotten: its next refusal is a first one again.
    expect(await timed(hold.hold(errors.shed(5), 'a'))).toBeLessThan(50);
    expect(await timed(hold.hold(errors.shed(5), 'c'))).toBeGreaterThanOrEqual(90);
  });
});
