/**
 * Pure tests of a runtime's completion (src/runs/completion.ts) and of what a failed terminal says
 * failed (src/runs/state.ts): the completion is taken exactly as a terminal event with the next
 * sequence, after every event the attempt holds, buffered ones included.
 */
import type { RunCompletion, RunEventReport, RunEventType, RunSettings } from '../../src/runs/contract';
import { completionEvent, decideCompletion } from '../../src/runs/completion';
import { applyClaim, decideEvent, initialState, summaryOf, type RunState } from '../../src/runs/state';

const settings: RunSettings = {
  leaseTimeoutMs: 60_000,
  maxAttempts: 2,
  retryWindowMs: 300_000,
  maxDurationMs: 3_600_000,
  claimDeadlineMs: 600_000,
  continueAsNewEvents: 2000,
  eventBufferMax: 5,
};
const T0 = 1_000_000;

const ev = (sequence: number, type: RunEventType = 'user', payload: Record<string, unknown> = {}, attempt = 1): RunEventReport => ({
  attempt,
  sequence,
  type,
  payload,
  createdAt: 0,
  receivedAt: 0,
});
const completion = (status: RunCompletion['status'], extra: Partial<RunCompletion> = {}): RunCompletion => ({
  attempt: 1,
  status,
  receivedAt: T0,
  ...extra,
});

/** A queued run claimed once (attempt 1), then the events taken in order of arrival (each must be accepted). */
function claimedWith(...events: RunEventReport[]): RunState {
  let state = applyClaim(
    initialState({ organizationId: 'o', runId: 'r', initialStatus: 'queued', createdAt: T0, memberId: 'm' }, { now: T0, settings }),
    T0,
    settings,
  );
  for (const event of events) {
    const decision = decideEvent(state, event, { now: T0, settings });
    expect(decision.verdict).toEqual({ ok: true });
    state = decision.next;
  }
  return state;
}

it('closes a run whose events are all applied, with the next sequence', () => {
  const state = claimedWith(ev(1), ev(2, 'assistant', { text: 'hi' }));
  expect(completionEvent(state, completion('succeeded'))).toMatchObject({
    sequence: 3,
    type: 'terminal',
    payload: { status: 'succeeded' },
  });
  const decision = decideCompletion(state, completion('succeeded', { result: { answer: 42 } }), { now: T0, settings });
  expect(decision.verdict).toEqual({ ok: true });
  expect(decision.next).toMatchObject({ status: 'succeeded', eventCount: 3 });
  expect(decision.next.outbox.at(-1)).toMatchObject({ sequence: 3, payload: { status: 'succeeded', result: { answer: 42 } } });
});

it('waits behind buffered events and their gap, and closes once the gap fills, in sequence order', () => {
  // 1 applied; 3 and 4 wait for 2.
  const state = claimedWith(ev(1), ev(3), ev(4));
  const decision = decideCompletion(state, completion('failed', { error: 'no', failure: 'task' }), { now: T0, settings });
  expect(decision.verdict).toEqual({ ok: true });
  expect(decision.next.status).toBe('running');
  expect(decision.next.buffer.map((b) => b.event.sequence)).toEqual([3, 4, 5]);
  // The gap fills: everything applies, the completion last.
  const filled = decideEvent(decision.next, ev(2), { now: T0, settings });
  expect(filled.next.status).toBe('failed');
  expect(filled.next.outbox.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5]);
  expect(summaryOf(filled.next)).toMatchObject({ error: 'no', failure: 'task' });
  // Nothing after it: an event beyond the completion is refused as after a terminal event.
  expect(decideEvent(decision.next, ev(6), { now: T0, settings }).verdict).toEqual({
    ok: false,
    error: 'after_terminal',
    terminalSequence: 5,
  });
});

it('is a duplicate when repeated while it waits, after_terminal with another status, run_closed once closed', () => {
  const waiting = decideCompletion(claimedWith(ev(2)), completion('succeeded'), { now: T0, settings }).next;
  expect(decideCompletion(waiting, completion('succeeded'), { now: T0, settings })).toEqual({
    verdict: { ok: false, error: 'duplicate' },
    next: waiting,
  });
  expect(decideCompletion(waiting, completion('cancelled'), { now: T0, settings }).verdict).toEqual({
    ok: false,
    error: 'after_terminal',
    terminalSequence: 3,
  });
  const closed = decideCompletion(claimedWith(ev(1)), completion('succeeded'), { now: T0, settings }).next;
  expect(decideCompletion(closed, completion('succeeded'), { now: T0, settings }).verdict).toEqual({
    ok: false,
    error: 'run_closed',
    status: 'succeeded',
  });
});

it('refuses another attempt of a claimed run as a terminal event of it would be', () => {
  const state = claimedWith(ev(1));
  expect(decideCompletion(state, completion('succeeded', { attempt: 2 }), { now: T0, settings }).verdict).toMatchObject({
    error: 'not_claimed',
  });
  const second = applyClaim({ ...state, status: 'awaiting_retry' }, T0, settings);
  expect(decideCompletion(second, completion('succeeded', { attempt: 1 }), { now: T0, settings }).verdict).toMatchObject({
    error: 'stale_attempt',
  });
});

describe('what a failed terminal says failed', () => {
  const close = (payload: Record<string, unknown>, ...before: RunEventReport[]) =>
    decideEvent(claimedWith(...before), ev(before.length + 1, 'terminal', payload), { now: T0, settings }).next;

  it('takes the runtime at its word', () => {
    expect(close({ status: 'failed', failure: 'runtime' }, ev(1, 'assistant', { text: 'partial' })).failure).toBe('runtime');
    expect(close({ status: 'failed', failure: 'task' }).failure).toBe('task');
  });

  it('without a word: task when the run answered (text or result), runtime when it did not', () => {
    expect(close({ status: 'failed' }, ev(1, 'assistant', { text: 'tests failed: 3' })).failure).toBe('task');
    expect(close({ status: 'failed', result: 'x' }).failure).toBe('task');
    expect(close({ status: 'failed' }, ev(1, 'assistant', { text: '  \n' })).failure).toBe('runtime');
    expect(close({ status: 'failed', error: 'exit 1' }).failure).toBe('runtime');
  });

  it('says nothing for a run that did not fail', () => {
    expect(close({ status: 'succeeded' }).failure).toBeUndefined();
    expect('failure' in summaryOf(close({ status: 'cancelled' }))).toBe(false);
  });
});
