/**
 * A runtime's completion (`POST /v1/automation-runs/{id}/complete`) as the run takes it: exactly as
 * a `terminal` event with the next sequence of the attempt would be. That sequence comes after
 * every event the run holds of the attempt, applied or waiting in the out-of-order buffer, so the
 * completion is ordered after every event the runtime sent before it: with a gap, it waits in the
 * buffer like any terminal event until the gap fills. Pure and deterministic (the run's workflow
 * computes it from its own state, in the Update's validator and again in its handler).
 */
import type { RunCompletion, RunEventReport } from './contract';
import { decideEvent, type EventDecision, type RunMoment, type RunState } from './state';

/** The terminal event the completion stands for, numbered after everything the attempt holds. */
export function completionEvent(state: RunState, completion: RunCompletion): RunEventReport {
  const sameAttempt = completion.attempt === state.attempt;
  const lastBuffered = state.buffer.at(-1)?.event.sequence ?? 0;
  // A newer attempt's first report starts it at sequence 1 (runs without claims); any other attempt is refused anyway.
  const sequence = sameAttempt ? Math.max(state.nextSequence, lastBuffered + 1) : 1;
  const payload: Record<string, unknown> = { status: completion.status };
  if (completion.error !== undefined) payload.error = completion.error;
  if (completion.failure !== undefined) payload.failure = completion.failure;
  if (completion.result !== undefined) payload.result = completion.result;
  return {
    attempt: completion.attempt,
    sequence,
    type: 'terminal',
    payload,
    createdAt: completion.receivedAt,
    receivedAt: completion.receivedAt,
  };
}

/**
 * The run's decision on a completion: a terminal event's (decideEvent), except that a completion
 * repeated while its terminal event still waits for a gap is a duplicate, as it would be once
 * applied and the run closed with its status.
 */
export function decideCompletion(state: RunState, completion: RunCompletion, at: RunMoment): EventDecision {
  const waiting = completion.attempt === state.attempt ? state.buffer.find((entry) => entry.event.type === 'terminal')?.event : undefined;
  if (waiting !== undefined && (waiting.payload.status ?? 'succeeded') === completion.status) {
    return { verdict: { ok: false, error: 'duplicate' }, next: state };
  }
  return decideEvent(state, completionEvent(state, completion), at);
}
