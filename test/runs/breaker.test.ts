/** The breaker's rule (src/runs/breaker.ts), pure: what counts, when it opens, the half-open probe. */
import { breakerPhase, closedBreaker, recordRunEnd, runVerdict, startProbe, type BreakerState, type RunEnd } from '../../src/runs/breaker';

const settings = { failures: 3, windowMs: 60_000 };
const T0 = 1_700_000_000_000;

const crash = (runId: string, at: number): RunEnd => ({ runId, at, verdict: 'runtime_failure', error: `boom ${runId}` });
const success = (runId: string, at: number): RunEnd => ({ runId, at, verdict: 'healthy', error: null });
const silent = (runId: string, at: number): RunEnd => ({ runId, at, verdict: 'silent', error: 'cancel_requested' });

/** Records each end at its own time, returning the final state and how many trips happened. */
function replay(ends: RunEnd[], state: BreakerState = closedBreaker()): { state: BreakerState; trips: number } {
  let trips = 0;
  for (const end of ends) {
    const next = recordRunEnd(state, end, { now: end.at, settings });
    state = next.state;
    if (next.tripped) trips += 1;
  }
  return { state, trips };
}

describe('what counts', () => {
  it('counts a lost lease, a failure the runtime names, and a failure without an answer; not an honest failure', () => {
    expect(runVerdict({ status: 'failed', error: 'lease_lost' })).toBe('runtime_failure');
    expect(runVerdict({ status: 'failed', error: 'segfault', failure: 'runtime' })).toBe('runtime_failure');
    // The state says `runtime` for a failed terminal without an answer or a word (src/runs/state.ts).
    expect(runVerdict({ status: 'failed', error: 'exit 1' })).toBe('runtime_failure');
    expect(runVerdict({ status: 'failed', error: 'tests failed', failure: 'task' })).toBe('healthy');
    expect(runVerdict({ status: 'succeeded', error: null })).toBe('healthy');
    for (const status of ['cancelled', 'timed_out', 'skipped'] as const) expect(runVerdict({ status, error: 'x' })).toBe('silent');
  });
});

describe('closed', () => {
  it('opens at the Nth runtime failure within the window, for a window, keeping the last error', () => {
    const { state, trips } = replay([crash('a', T0), crash('b', T0 + 1_000), crash('c', T0 + 2_000)]);
    expect(trips).toBe(1);
    expect(state).toMatchObject({ pausedUntil: T0 + 2_000 + 60_000, lastError: 'boom c', failures: [], trips: 1 });
    expect(breakerPhase(state, T0 + 61_999)).toBe('open');
    expect(breakerPhase(state, T0 + 62_000)).toBe('half_open');
  });

  it('stays closed one failure short of N, and when the failures are spread wider than the window', () => {
    expect(replay([crash('a', T0), crash('b', T0 + 1_000)]).state.pausedUntil).toBeNull();
    const spread = replay([crash('a', T0), crash('b', T0 + 30_000), crash('c', T0 + 61_000)]);
    expect(spread.trips).toBe(0);
    expect(spread.state.failures.map((f) => f.runId)).toEqual(['b', 'c']);
  });

  it('does not count honest failures, successes or silent ends, and a success does not clear the count', () => {
    const { state, trips } = replay([crash('a', T0), success('s', T0 + 1), silent('x', T0 + 2), crash('b', T0 + 3), crash('c', T0 + 4)]);
    expect(trips).toBe(1);
    expect(state.pausedUntil).toBe(T0 + 4 + 60_000);
  });

  it('counts a run once, however often its closing write repeats', () => {
    const { state, trips } = replay([crash('a', T0), crash('a', T0 + 1), crash('a', T0 + 2), crash('b', T0 + 3)]);
    expect(trips).toBe(0);
    expect(state.failures.map((f) => f.runId)).toEqual(['a', 'b']);
  });

  it('ignores an end that reaches it a window late (a write retried through an outage)', () => {
    const state = replay([crash('a', T0), crash('b', T0 + 1)]).state;
    expect(recordRunEnd(state, crash('old', T0 - 60_000), { now: T0 + 2, settings })).toEqual({ state, tripped: false });
  });
});

describe('open', () => {
  const open = replay([crash('a', T0), crash('b', T0), crash('c', T0)]).state;

  it('lets no run start, and outcomes of runs already under way change nothing', () => {
    expect(startProbe(open, 'r', { now: T0 + 1_000, settings })).toEqual({ allowed: false, state: open });
    expect(recordRunEnd(open, crash('d', T0 + 1_000), { now: T0 + 1_000, settings })).toEqual({ state: open, tripped: false });
    expect(recordRunEnd(open, success('e', T0 + 1_000), { now: T0 + 1_000, settings })).toEqual({ state: open, tripped: false });
  });
});

describe('half-open', () => {
  const open = replay([crash('a', T0), crash('b', T0), crash('c', T0)]).state;
  const later = T0 + 60_000;

  it('lets exactly one invocation probe: the first to ask, or the same run asking again', () => {
    const first = startProbe(open, 'probe', { now: later, settings });
    expect(first.allowed).toBe(true);
    expect(first.state.probe).toEqual({ runId: 'probe', at: later });
    expect(startProbe(first.state, 'other', { now: later + 1, settings }).allowed).toBe(false);
    expect(startProbe(first.state, 'probe', { now: later + 1, settings }).allowed).toBe(true);
  });

  it('closes when the probe succeeds, or fails honestly', () => {
    const probing = startProbe(open, 'probe', { now: later, settings }).state;
    const closed = recordRunEnd(probing, success('probe', later + 5), { now: later + 5, settings });
    expect(closed).toEqual({ state: { ...closedBreaker(), trips: 1 }, tripped: false });
    expect(startProbe(closed.state, 'next', { now: later + 6, settings }).allowed).toBe(true);
  });

  it('opens for another window when the probe fails, a trip too', () => {
    const probing = startProbe(open, 'probe', { now: later, settings }).state;
    const reopened = recordRunEnd(probing, crash('probe', later + 5), { now: later + 5, settings });
    expect(reopened.tripped).toBe(true);
    expect(reopened.state).toMatchObject({ pausedUntil: later + 5 + 60_000, lastError: 'boom probe', probe: null, trips: 2 });
  });

  it("ignores other runs' ends while a probe is under way; a probe that ends silently lets the next one probe", () => {
    const probing = startProbe(open, 'probe', { now: later, settings }).state;
    expect(recordRunEnd(probing, crash('stray', later + 1), { now: later + 1, settings }).state).toBe(probing);
    const freed = recordRunEnd(probing, silent('probe', later + 2), { now: later + 2, settings }).state;
    expect(freed.probe).toBeNull();
    expect(breakerPhase(freed, later + 2)).toBe('half_open');
    expect(startProbe(freed, 'next', { now: later + 3, settings }).allowed).toBe(true);
  });

  it('lets the next invocation probe when a probe has not ended within a window', () => {
    const probing = startProbe(open, 'probe', { now: later, settings }).state;
    expect(startProbe(probing, 'next', { now: later + 59_999, settings }).allowed).toBe(false);
    expect(startProbe(probing, 'next', { now: later + 60_000, settings })).toMatchObject({
      allowed: true,
      state: { probe: { runId: 'next' } },
    });
  });

  it('without a probe under way, lets the first run to end decide', () => {
    expect(recordRunEnd(open, success('any', later + 1), { now: later + 1, settings }).state.pausedUntil).toBeNull();
    expect(recordRunEnd(open, crash('any', later + 1), { now: later + 1, settings }).tripped).toBe(true);
  });
});
