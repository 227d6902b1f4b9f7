/**
 * The coalescing rule at the cadences runtimes pick: a runtime that heartbeats at least every
 * third of its lease never loses it to coalescing, for any lease of 3 s or more and any cap, and no
 * answer from memory names a lease the run does not hold; at 10 s against 60 s at most one
 * heartbeat in four is forwarded. Pure: a simulated run's lease beside the real coalescer.
 */
import fc from 'fast-check';
import {
  HeartbeatCoalescer,
  coalesceMarginMs,
  expectedGapMs,
  mayAnswerFromMemory,
  observeHeartbeat,
} from '../../src/runs/heartbeat-coalescer';

interface Beat {
  at: number;
  /** The forward of this heartbeat fails (a 503) and the runtime sends it again `resendAfterMs` later. */
  fails?: boolean;
}

interface Outcome {
  received: number;
  forwarded: number;
  /** A heartbeat that found the run's lease already over. */
  lost: number;
  /** An answer from memory that named a later lease end than the run holds. */
  overstated: number;
}

/**
 * Drives one run: each forward lands `latencyMs` after its heartbeat and moves the run's lease to
 * that moment plus the lease, as the workflow does (`applyHeartbeat`, src/runs/state.ts).
 */
function simulate(options: { leaseMs: number; fraction: number; latencyMs: number; beats: Beat[]; resendAfterMs?: number }): Outcome {
  const { leaseMs, fraction, latencyMs } = options;
  const coalescer = new HeartbeatCoalescer(HeartbeatCoalescer.windowFor(leaseMs, fraction), undefined, fraction);
  const key = HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 1, memberId: 'member' });
  // The claim set the lease at time 0.
  let leaseEnd = leaseMs;
  const outcome: Outcome = { received: 0, forwarded: 0, lost: 0, overstated: 0 };
  const queue = [...options.beats].sort((a, b) => a.at - b.at);
  while (queue.length > 0) {
    const beat = queue.shift()!;
    outcome.received += 1;
    if (beat.at >= leaseEnd) outcome.lost += 1;
    const verdict = coalescer.admit(key, beat.at);
    if (verdict.forward) {
      outcome.forwarded += 1;
      if (beat.fails) {
        coalescer.release(key, beat.at);
        // den runtime sends a failed heartbeat again once, half an interval later (src/cli/runtime/runtime.ts).
        queue.push({ at: beat.at + options.resendAfterMs! });
        queue.sort((a, b) => a.at - b.at);
        continue;
      }
      const landed = beat.at + latencyMs;
      if (landed < leaseEnd) leaseEnd = Math.max(leaseEnd, landed + leaseMs);
      coalescer.forwarded(key, beat.at, { leaseTimeoutMs: leaseMs });
    } else if ('leaseExpiresAt' in verdict && verdict.leaseValid && verdict.leaseExpiresAt > leaseEnd) {
      outcome.overstated += 1;
    }
  }
  return outcome;
}

/** Heartbeats every `intervalMs` for `forMs`, each late by up to `jitterMs`, the first one interval after the claim. */
function cadence(intervalMs: number, forMs: number, jitter: (i: number) => number = () => 0): Beat[] {
  const beats: Beat[] = [];
  for (let i = 1; i * intervalMs <= forMs; i++) beats.push({ at: i * intervalMs + jitter(i) });
  return beats;
}

describe('the rule', () => {
  it('learns the largest of the last few gaps', () => {
    let c = observeHeartbeat(undefined, 0);
    expect(expectedGapMs(c)).toBeUndefined();
    for (const at of [1_000, 2_000, 2_500, 3_500]) c = observeHeartbeat(c, at);
    expect(expectedGapMs(c)).toBe(1_000);
    // Past four gaps, the oldest is forgotten: a runtime that speeds up is learnt.
    for (const at of [3_600, 3_700, 3_800, 3_900]) c = observeHeartbeat(c, at);
    expect(expectedGapMs(c)).toBe(100);
  });

  it('answers from memory only while the lease outlasts the next heartbeat by the margin', () => {
    const c = { lastAt: 0, gaps: [10_000] };
    // An eighth of the lease, or room for a resend half an interval later and its landing, and never under 2 s.
    expect(coalesceMarginMs(60_000, 10_000)).toBe(8_750);
    expect(coalesceMarginMs(60_000, 1_000)).toBe(7_500);
    expect(coalesceMarginMs(3_000, 1_000)).toBe(2_000);
    expect(coalesceMarginMs(16_000, 1_000)).toBe(2_000);
    expect(coalesceMarginMs(24_000, 1_000)).toBe(3_000);
    expect(mayAnswerFromMemory({ leaseExpiresAt: 60_000, leaseTimeoutMs: 60_000 }, 40_000, c)).toBe(true); // 10 s left after the next beat
    expect(mayAnswerFromMemory({ leaseExpiresAt: 60_000, leaseTimeoutMs: 60_000 }, 42_000, c)).toBe(false); // 8 s left
    expect(mayAnswerFromMemory({ leaseExpiresAt: 60_000, leaseTimeoutMs: 60_000 }, 0, undefined)).toBe(false); // cadence unknown
  });
});

describe('a runtime beating at least every third of its lease never loses it', () => {
  it.each([
    ['1 s against 3 s (den runtime --heartbeat-interval 1)', 1_000, 3_000],
    ['20 s against 60 s', 20_000, 60_000],
    ['10 s against 60 s', 10_000, 60_000],
    ['1 s against 60 s', 1_000, 60_000],
    ['5 min against 15 min', 300_000, 900_000],
  ])('%s, at every cap', (_name, intervalMs, leaseMs) => {
    for (const fraction of [0.1, 0.25, 0.5, 0.7, 0.75]) {
      const outcome = simulate({ leaseMs, fraction, latencyMs: 50, beats: cadence(intervalMs, 20 * leaseMs) });
      expect({ fraction, lost: outcome.lost, overstated: outcome.overstated }).toEqual({ fraction, lost: 0, overstated: 0 });
    }
  });

  it('for any lease of 3 s or more, any interval up to a third of it, jitter, slow forwards and failed forwards', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 3_000, max: 3_600_000 }),
        fc.double({ min: 0.02, max: 1 / 3, noNaN: true }),
        fc.constantFrom(0.1, 0.25, 0.5, 0.7, 0.75),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 64, maxLength: 64 }),
        fc.array(fc.boolean(), { minLength: 64, maxLength: 64 }),
        (leaseMs, ratio, fraction, latencyShare, jitters, failures) => {
          const intervalMs = Math.max(1, Math.floor(leaseMs * ratio));
          // A heartbeat may come late by up to an eightieth of the lease and a forward take up to a
          // twenty-fourth of it to land, a resent one included: the margin is for that.
          const beats = cadence(intervalMs, 40 * intervalMs, (i) => jitters[i % 64]! * (leaseMs / 80)).map((beat, i) => ({
            ...beat,
            // At most one failed forward in a row: den runtime sends it again once, then keeps its beat.
            fails: failures[i % 64]! && !failures[(i + 63) % 64]!,
          }));
          const outcome = simulate({ leaseMs, fraction, latencyMs: latencyShare * (leaseMs / 24), beats, resendAfterMs: intervalMs / 2 });
          return outcome.lost === 0 && outcome.overstated === 0;
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('what it costs Temporal', () => {
  it('at 10 s against 60 s, at most one heartbeat in four is forwarded (one in five once the cadence is known)', () => {
    const outcome = simulate({ leaseMs: 60_000, fraction: 0.7, latencyMs: 200, beats: cadence(10_000, 30 * 60_000, (i) => (i % 3) * 37) });
    expect(outcome.lost).toBe(0);
    expect(outcome.forwarded / outcome.received).toBeLessThanOrEqual(0.25);
    expect(outcome.forwarded / outcome.received).toBeCloseTo(0.2, 1);
  });

  it('at 20 s against 60 s, and 2 s against 6 s, one heartbeat in two', () => {
    for (const [intervalMs, leaseMs] of [
      [20_000, 60_000],
      [2_000, 6_000],
    ] as const) {
      const outcome = simulate({ leaseMs, fraction: 0.7, latencyMs: 20, beats: cadence(intervalMs, 200 * intervalMs) });
      expect(outcome.lost).toBe(0);
      expect(outcome.forwarded / outcome.received).toBeCloseTo(0.5, 1);
    }
  });

  it('at 1 s against 3 s, every heartbeat, so each forward has 2 s to land', () => {
    const outcome = simulate({ leaseMs: 3_000, fraction: 0.7, latencyMs: 20, beats: cadence(1_000, 200 * 1_000) });
    expect(outcome.lost).toBe(0);
    // The first heartbeats, before the cadence is known, are forwarded too.
    expect(outcome.forwarded).toBe(outcome.received);
  });
});
