/**
 * A breaker per member: when the member's runtime keeps breaking, their next requests start no
 * run for a while instead of failing one after another. Pure: (state, outcome, { now, settings })
 * → state; the store (src/runs/breaker-store.ts) keeps the state in Postgres.
 *
 * - What counts is a run of the member that ended `failed` because the runtime broke
 *   (`runtimeFailure`): its lease was lost, or its runtime said so (`failure: "runtime"`: the
 *   command crashed, or exited without an answer, or the runner failed on its own), or it failed
 *   without saying which and without an answer. A run that honestly failed with an answer
 *   (`failure: "task"`, or an answer and no word) does not count.
 * - Closed: `failures` runtime failures within `windowMs` open it for `windowMs` (a trip).
 * - Open: nothing runs; outcomes of runs already under way change nothing.
 * - Half-open, once the pause is over: the next invocation is a probe (`startProbe`). Its success,
 *   or an honest failure (the runtime answered), closes the breaker; a runtime failure opens it for
 *   another window (a trip too). A probe that ends otherwise (cancelled, timed out, never claimed),
 *   or has not ended within a window, lets the next invocation probe. Without a probe under way,
 *   the first run to end decides.
 */
import type { RunSummary } from './contract';

export interface BreakerSettings {
  failures: number;
  windowMs: number;
}

/** When the breaker changes (ms), and the settings it changes under. */
export interface BreakerMoment {
  now: number;
  settings: BreakerSettings;
}

interface BreakerFailure {
  runId: string;
  at: number;
  error: string | null;
}

export interface BreakerState {
  /** Runtime failures since the breaker last closed, within the window, oldest first. */
  failures: BreakerFailure[];
  /** While open or half-open: when the pause ends (ms); null while closed. */
  pausedUntil: number | null;
  /** The error of the last runtime failure that opened the breaker (or counted toward it). */
  lastError: string | null;
  /** Half-open: the run probing the runtime, and when it started. */
  probe: { runId: string; at: number } | null;
  /** Times the breaker opened. */
  trips: number;
}

export type BreakerPhase = 'closed' | 'open' | 'half_open';

export const closedBreaker = (): BreakerState => ({ failures: [], pausedUntil: null, lastError: null, probe: null, trips: 0 });

export function breakerPhase(state: BreakerState, now: number): BreakerPhase {
  if (state.pausedUntil === null) return 'closed';
  return now < state.pausedUntil ? 'open' : 'half_open';
}

/** How a run's end speaks of its runtime: it broke, it worked, or the run says nothing about it. */
type RunVerdict = 'runtime_failure' | 'healthy' | 'silent';

export function runVerdict(summary: Pick<RunSummary, 'status' | 'error' | 'failure'>): RunVerdict {
  if (summary.status === 'succeeded') return 'healthy';
  if (summary.status !== 'failed') return 'silent';
  if (summary.error === 'lease_lost') return 'runtime_failure';
  return summary.failure === 'task' ? 'healthy' : 'runtime_failure';
}

export interface RunEnd {
  runId: string;
  /** When the run ended (ms). */
  at: number;
  verdict: RunVerdict;
  error: string | null;
}

/** The breaker after a run of its member ended; `tripped` when this opened it. */
export function recordRunEnd(
  state: BreakerState,
  end: RunEnd,
  { now, settings }: BreakerMoment,
): { state: BreakerState; tripped: boolean } {
  const unchanged = { state, tripped: false };
  // A run whose end reaches the breaker this late (its write retried through an outage) is news of another time.
  if (end.at <= now - settings.windowMs) return unchanged;
  const open = (): { state: BreakerState; tripped: boolean } => ({
    state: { failures: [], pausedUntil: now + settings.windowMs, lastError: end.error, probe: null, trips: state.trips + 1 },
    tripped: true,
  });
  switch (breakerPhase(state, now)) {
    case 'open':
      return unchanged;
    case 'half_open': {
      const probe = liveProbe(state, now, settings);
      if (probe !== null && probe.runId !== end.runId) return unchanged;
      if (end.verdict === 'runtime_failure') return open();
      if (end.verdict === 'healthy') return { state: { ...closedBreaker(), trips: state.trips }, tripped: false };
      return probe === null ? unchanged : { state: { ...state, probe: null }, tripped: false };
    }
    case 'closed': {
      if (end.verdict !== 'runtime_failure' || state.failures.some((f) => f.runId === end.runId)) return unchanged;
      const failures = [
        ...state.failures.filter((f) => f.at > now - settings.windowMs),
        { runId: end.runId, at: end.at, error: end.error },
      ];
      if (failures.length >= settings.failures) return open();
      return { state: { ...state, failures, lastError: end.error }, tripped: false };
    }
  }
}

/** The probe under way, unless it has run for a whole window without ending. */
function liveProbe(state: BreakerState, now: number, settings: BreakerSettings): BreakerState['probe'] {
  return state.probe !== null && now - state.probe.at < settings.windowMs ? state.probe : null;
}

/**
 * Whether an invocation may start its run now: always while closed, never while open, and while
 * half-open only as the probe (the first to ask, or the same run asking again).
 */
export function startProbe(
  state: BreakerState,
  runId: string,
  { now, settings }: BreakerMoment,
): { allowed: boolean; state: BreakerState } {
  const phase = breakerPhase(state, now);
  if (phase !== 'half_open') return { allowed: phase === 'closed', state };
  const probe = liveProbe(state, now, settings);
  if (probe !== null) return { allowed: probe.runId === runId, state };
  return { allowed: true, state: { ...state, probe: { runId, at: now } } };
}
