/**
 * Unit tests of what admits runs by capacity and keeps admitted ones alive: the live-run bound
 * (src/runs/capacity.ts), which reports start a run or an attempt and the lease margin
 * (src/runs/report.ts), and the heartbeat coalescer's default window, lease floor and remembered
 * refusals (src/runs/heartbeat-coalescer.ts).
 */
import { errors } from '../../src/app/errors';
import { hasRoom } from '../../src/runs/capacity';
import { HeartbeatCoalescer } from '../../src/runs/heartbeat-coalescer';
import { leaseMarginMs, startsAttempt } from '../../src/runs/report';
import { runsSettings } from '../../src/runs/settings';

const LEASE = 60_000;
const BEAT = 10_000;

describe('live-run capacity', () => {
  it('has room below the limit, none at it, and 0 is no limit', () => {
    expect(hasRoom(1, 2)).toBe(true);
    expect(hasRoom(2, 2)).toBe(false);
    expect(hasRoom(5, 2)).toBe(false);
    expect(hasRoom(1_000_000, 0)).toBe(true);
  });

  it('is asked by a report that starts a run or a newer attempt after a lost lease, never by one of a live run', () => {
    expect(startsAttempt(undefined, 1)).toBe(true);
    expect(startsAttempt({ status: 'running', attempt: 1 }, 1)).toBe(false);
    expect(startsAttempt({ status: 'running', attempt: 1 }, 2)).toBe(false);
    expect(startsAttempt({ status: 'awaiting_retry', attempt: 1 }, 2)).toBe(true);
    expect(startsAttempt({ status: 'awaiting_retry', attempt: 1 }, 1)).toBe(false);
    // Claim-required runs start attempts only through a claim, which asks it itself.
    expect(startsAttempt({ status: 'awaiting_retry', attempt: 1, claimRequired: true }, 2)).toBe(false);
    expect(startsAttempt({ status: 'queued', attempt: 1, claimRequired: true }, 1)).toBe(false);
  });

  it('keeps a second of margin on a lease, a twentieth of a short one', () => {
    expect(leaseMarginMs(60_000)).toBe(1_000);
    expect(leaseMarginMs(3_000)).toBe(150);
  });
});

describe('the default coalescing window', () => {
  it('is 0.7 of the lease: at a 10 s beat and a 60 s lease, one heartbeat in five, the first included under 0.25 within minutes', () => {
    expect(runsSettings.parse({})).toMatchObject({ ok: true, settings: { admission: { heartbeatCoalesceFraction: 0.7 } } });
    const c = new HeartbeatCoalescer(HeartbeatCoalescer.windowFor(LEASE));
    const key = HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 1, memberId: 'm' });
    // A little jitter, as runtimes' timers have.
    const beats = Array.from({ length: 24 }, (_, i) => i * BEAT + (i % 3) * 37);
    const forwarded = beats.filter((t) => {
      const verdict = c.admit(key, t);
      if (verdict.forward) c.forwarded(key, t, { leaseTimeoutMs: LEASE });
      return verdict.forward;
    });
    expect(forwarded.slice(0, 3)).toEqual([beats[0], beats[5], beats[10]]);
    expect(forwarded.length / beats.length).toBeLessThanOrEqual(0.25);
    // Each forward comes at least 9 s before the lease the previous one set runs out.
    for (let i = 1; i < forwarded.length; i++) expect(forwarded[i - 1]! + LEASE - forwarded[i]!).toBeGreaterThanOrEqual(9_000);
  });
});

describe('what the coalescer keeps for the forward path', () => {
  const key = HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 1, memberId: 'm' });

  it('hands the next forward the least lease its forwards set, past the window, a failed forward and a sweep', () => {
    const c = new HeartbeatCoalescer(1_000, 0);
    expect(c.admit(key, 0)).toEqual({ forward: true });
    c.forwarded(key, 0, { leaseTimeoutMs: 4_000 });
    const next = c.admit(key, 3_000);
    expect(next).toEqual({ forward: true, leaseFloor: 4_000 });
    c.release(key, 3_000);
    // The sweep runs at every admit here (bound 0): the entry outlives its window while its lease lasts.
    c.admit(HeartbeatCoalescer.key({ organizationId: 'org', runId: 'other', attempt: 1, memberId: 'm' }), 3_500);
    expect(c.admit(key, 3_600)).toEqual({ forward: true, leaseFloor: 4_000 });
    c.forwarded(key, 3_600, { leaseTimeoutMs: 4_000 });
    expect(c.admit(key, 7_000)).toEqual({ forward: true, leaseFloor: 7_600 });
  });

  it('does not take a floor from a forward that holds no lease', () => {
    const c = new HeartbeatCoalescer(1_000);
    c.admit(key, 0);
    c.forwarded(key, 0, { leaseTimeoutMs: 4_000, cancelRequested: false, lease: { attempt: 2, leaseValid: false } });
    expect(c.admit(key, 3_000)).toEqual({ forward: true });
  });

  it('repeats a refusal until its Retry-After, then forwards again', () => {
    const c = new HeartbeatCoalescer(1_000);
    const refusal = errors.capacity(10);
    c.admit(key, 0);
    c.markRefused(key, 0, { error: refusal, until: 10_000 });
    expect(c.admit(key, 1)).toEqual({ forward: false, refusal });
    expect(c.admit(key, 9_999)).toEqual({ forward: false, refusal });
    expect(c.admit(key, 10_000)).toEqual({ forward: true });
  });
});
