/** Unit tests of the hold before a refusal of load is answered (src/app/http/refusal-hold.ts). */
import { AppError, errors } from '../../src/app/errors';
import { createRefusalHold, holdMsFor } from '../../src/app/http/refusal-hold';

describe('the refusal hold', () => {
  it('holds refusals of load, at most their Retry-After, and nothing else', () => {
    expect(holdMsFor(errors.shed(5), 1000)).toBe(1000);
    expect(holdMsFor(errors.capacity(10), 1000)).toBe(1000);
    expect(holdMsFor(errors.webhook('overloaded', 503, {}, { 'retry-after': '1' }), 3000)).toBe(1000);
    expect(holdMsFor(errors.shed(5), 0)).toBe(0);
    expect(holdMsFor(errors.unavailable('temporal'), 1000)).toBe(0);
    expect(holdMsFor(new AppError('conflict', 409, { error: 'conflict', message: 'x' }), 1000)).toBe(0);
  });

  it('holds at most its bound at once and answers the rest at once', async () => {
    const hold = createRefusalHold(200, 2);
    const started = Date.now();
    const held = [hold.hold(errors.shed(1)), hold.hold(errors.shed(1))];
    expect(hold.held).toBe(2);
    await hold.hold(errors.shed(1));
    expect(Date.now() - started).toBeLessThan(100);
    await Promise.all(held);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(hold.held).toBe(0);
  });
});
