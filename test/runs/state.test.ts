/** Pure unit tests of the run actor's rules (src/runs/state.ts) and the heartbeat coalescer. */
import fc from 'fast-check';
import { utf8Bytes } from '../../src/app/utf8';
import { createNotices } from '../../src/app/notices';
import { runCancelRequested } from '../../src/runs/cancel';
import { HeartbeatCoalescer } from '../../src/runs/heartbeat-coalescer';
import type { RunEventReport, RunEventType, RunSettings } from '../../src/runs/contract';
import {
  CARRIED_STATE_MAX_BYTES,
  carriedBytes,
  applyClaim,
  claimVerdict,
  cancelVerdict,
  decideEvent,
  applyCancelRequest,
  BUFFER_MAX_BYTES,
  CARRY_MAX_EVENTS,
  USAGE_MAX_KEYS,
  addUsage,
  applyHeartbeat,
  canCarry,
  commitOutbox,
  compactState,
  initialState,
  deadlineMovedOn,
  nextDeadline,
  outboxBatch,
  summaryOf,
  tick,
  type RunState,
} from '../../src/runs/state';

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

const ev = (attempt: number, sequence: number, type: RunEventType = 'user', payload: Record<string, unknown> = {}): RunEventReport => ({
  attempt,
  sequence,
  type,
  payload,
  createdAt: 0,
  receivedAt: 0,
});

const running = (now = T0) =>
  initialState({ organizationId: 'org', runId: 'r', initialStatus: 'running', createdAt: now }, { now, settings });
const queued = (now = T0) =>
  initialState(
    { organizationId: 'org', runId: 'r', initialStatus: 'queued', createdAt: now, memberId: 'm', input: { text: 'hi' } },
    { now, settings },
  );
/** The state once an event is taken in: what a signal does whatever the verdict, and an Update after an `ok` one. */
const nextState = (state: RunState, event: RunEventReport, now: number, runSettings: RunSettings) =>
  decideEvent(state, event, { now, settings: runSettings }).next;
const applyAll = (state: RunState, events: RunEventReport[], now = T0) => events.reduce((s, e) => nextState(s, e, now, settings), state);
const sequences = (state: RunState) => state.outbox.map((e) => [e.attempt, e.sequence]);

describe('run state: start and claim', () => {
  it('a running run starts with a lease; a queued one waits for a claim', () => {
    const r = running();
    expect(r).toMatchObject({ status: 'running', attempt: 0, startedAt: T0, leaseExpiresAt: T0 + 60_000 });
    expect(nextDeadline(r, settings)).toBe(T0 + 60_000);
    const q = queued();
    expect(q).toMatchObject({ status: 'queued', attempt: 0, startedAt: null, leaseExpiresAt: null, memberId: 'm' });
    expect(nextDeadline(q, settings)).toBe(T0 + 600_000);
  });

  it('the lease timer is set again once a heartbeat moved the deadline by a quarter of the lease, not for less', () => {
    const r = running();
    const armed = nextDeadline(r, settings)!;
    // A quarter of the 60 s lease is 15 s: a heartbeat 10 s in moves it too little, one 15 s in enough.
    expect(
      deadlineMovedOn(applyHeartbeat(r, { heartbeat: { attempt: 0, receivedAt: 0 } }, { now: T0 + 10_000, settings }), armed, settings),
    ).toBe(false);
    expect(
      deadlineMovedOn(applyHeartbeat(r, { heartbeat: { attempt: 0, receivedAt: 0 } }, { now: T0 + 15_000, settings }), armed, settings),
    ).toBe(true);
    // A closed run has no deadline to follow.
    expect(deadlineMovedOn(tick(r, T0 + settings.maxDurationMs, settings), armed, settings)).toBe(false);
  });

  it('only a claim starts an attempt of a queued run; reports before it, or for another attempt, are ignored', () => {
    expect(claimVerdict(queued())).toEqual({ ok: true });
    const byHeartbeat = applyHeartbeat(queued(), { heartbeat: { attempt: 1, receivedAt: 0 } }, { now: T0 + 5, settings });
    expect(byHeartbeat).toMatchObject({ status: 'queued', attempt: 0, ignored: { stale: 1 } });
    const claimed = applyClaim(queued(), T0 + 5, settings);
    expect(claimed).toMatchObject({ status: 'running', attempt: 1, startedAt: T0 + 5, leaseExpiresAt: T0 + 5 + 60_000, transitions: 1 });
    expect(claimVerdict(claimed)).toEqual({ ok: false, error: 'already_claimed', status: 'running' });
    expect(nextState(claimed, ev(1, 1), T0 + 7, settings)).toMatchObject({
      status: 'running',
      attempt: 1,
      eventCount: 1,
      nextSequence: 2,
    });
    // A report of a newer attempt does not switch a claimed run's attempt: only the next claim does.
    expect(applyHeartbeat(claimed, { heartbeat: { attempt: 2, receivedAt: 0 } }, { now: T0 + 8, settings })).toMatchObject({
      attempt: 1,
      ignored: { stale: 1 },
    });
  });

  it('after a lost lease a claim starts the next attempt; a closed run refuses claims', () => {
    const lost = tick(applyClaim(queued(), T0, settings), T0 + 60_000, settings);
    expect(lost.status).toBe('awaiting_retry');
    expect(claimVerdict(lost)).toEqual({ ok: true });
    expect(applyClaim(lost, T0 + 61_000, settings)).toMatchObject({ status: 'running', attempt: 2, leaseExpiresAt: T0 + 121_000 });
    const done = nextState(applyClaim(queued(), T0, settings), ev(1, 1, 'terminal'), T0, settings);
    expect(claimVerdict(done)).toEqual({ ok: false, error: 'run_closed', status: 'succeeded' });
  });

  it('an unclaimed queued run is skipped at its claim deadline (runner_unavailable)', () => {
    const q = queued();
    expect(tick(q, T0 + 599_999, settings).status).toBe('queued');
    expect(tick(q, T0 + 600_000, settings)).toMatchObject({ status: 'skipped', error: 'runner_unavailable', endedAt: T0 + 600_000 });
    expect(nextDeadline(tick(q, T0 + 600_000, settings), settings)).toBeNull();
  });
});

describe('run state: ordering and dedupe', () => {
  it('applies in sequence order, buffering until a gap fills', () => {
    let s = applyAll(running(), [ev(1, 1), ev(1, 3), ev(1, 4)]);
    expect(sequences(s)).toEqual([[1, 1]]);
    expect(s.buffer.map((b) => b.event.sequence)).toEqual([3, 4]);
    s = nextState(s, ev(1, 2), T0, settings);
    expect(sequences(s)).toEqual([
      [1, 1],
      [1, 2],
      [1, 3],
      [1, 4],
    ]);
    expect(s.buffer).toEqual([]);
    expect(s.bufferBytes).toBe(0);
    expect(s.nextSequence).toBe(5);
  });

  it('ignores duplicates, applied or buffered', () => {
    const s = applyAll(running(), [ev(1, 1), ev(1, 1), ev(1, 3), ev(1, 3)]);
    expect(s.eventCount).toBe(1);
    expect(s.buffer).toHaveLength(1);
    expect(s.ignored.duplicate).toBe(2);
  });

  it('property: any arrival order with duplicates applies exactly 1..n once, in order', () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 1, max: 40 })
          .chain((n) =>
            fc
              .tuple(fc.constant(n), fc.array(fc.integer({ min: 1, max: n }), { maxLength: 20 }))
              .chain(([size, dupes]) =>
                fc.tuple(
                  fc.constant(size),
                  fc.shuffledSubarray([...Array.from({ length: size }, (_, i) => i + 1), ...dupes], { minLength: size + dupes.length }),
                ),
              ),
          ),
        ([n, order]) => {
          const s = applyAll(
            running(),
            order.map((sequence) => ev(1, sequence)),
            T0,
          );
          const wide = { ...settings, eventBufferMax: 1000 };
          const t = order.reduce((acc, sequence) => nextState(acc, ev(1, sequence), T0, wide), running());
          expect(t.outbox.map((e) => e.sequence)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
          expect(t.ignored.duplicate).toBe(order.length - n);
          expect(t.buffer).toEqual([]);
          // With a small buffer nothing is applied twice or out of order, whatever is dropped.
          const applied = s.outbox.map((e) => e.sequence);
          expect(applied).toEqual(Array.from({ length: applied.length }, (_, i) => i + 1));
        },
      ),
      { seed: 4, numRuns: 200 },
    );
  });

  it('bounds the buffer by count: the furthest-ahead events are dropped and counted', () => {
    const s = applyAll(running(), [ev(1, 1), ev(1, 10), ev(1, 9), ev(1, 8), ev(1, 7), ev(1, 6), ev(1, 5), ev(1, 4)]);
    expect(s.buffer.map((b) => b.event.sequence)).toEqual([4, 5, 6, 7, 8]);
    expect(s.ignored.overflow).toBe(2);
  });

  it('bounds the buffer by bytes', () => {
    const big = 'x'.repeat(BUFFER_MAX_BYTES / 2);
    const s = applyAll(running(), [ev(1, 1), ev(1, 3, 'user', { big }), ev(1, 4, 'user', { big })]);
    expect(s.buffer.map((b) => b.event.sequence)).toEqual([3]);
    expect(s.bufferBytes).toBeLessThanOrEqual(BUFFER_MAX_BYTES);
    expect(s.ignored.overflow).toBe(1);
  });

  it('ignores older attempts; a newer attempt restarts at sequence 1 and drops the old buffer', () => {
    let s = applyAll(running(), [ev(1, 1), ev(1, 3)]);
    s = nextState(s, ev(2, 1), T0 + 10, settings);
    expect(s).toMatchObject({ attempt: 2, nextSequence: 2, buffer: [], status: 'running' });
    s = applyAll(s, [ev(1, 2), ev(1, 4)]);
    expect(s.ignored.stale).toBe(2);
    expect(sequences(s)).toEqual([
      [1, 1],
      [2, 1],
    ]);
    expect(applyHeartbeat(s, { heartbeat: { attempt: 1, receivedAt: 0 } }, { now: T0, settings }).ignored.stale).toBe(3);
  });

  it('rejects attempts above maxAttempts', () => {
    const s = applyAll(running(), [ev(1, 1), ev(3, 1)]);
    expect(s).toMatchObject({ attempt: 1, eventCount: 1 });
    expect(s.ignored.rejected).toBe(1);
  });

  it('sums the numeric fields of usage payloads, safely', () => {
    const s = applyAll(running(), [
      ev(1, 1, 'usage', { inputTokens: 10, cost: 0.5, model: 'm', nested: { a: 1 }, nan: Number.NaN }),
      ev(1, 2, 'usage', { inputTokens: 5, constructor: 2 }),
    ]);
    expect(s.usage).toEqual({ inputTokens: 15, cost: 0.5, constructor: 2 });
    const polluted = addUsage({}, JSON.parse('{"__proto__": 5, "ok": 1}') as Record<string, unknown>);
    expect(polluted).toEqual({ ok: 1 });
    expect(Object.getPrototypeOf(polluted)).toBe(Object.prototype);
    const many = Object.fromEntries(Array.from({ length: USAGE_MAX_KEYS + 10 }, (_, i) => [`k${i}`, 1]));
    expect(Object.keys(addUsage({}, many))).toHaveLength(USAGE_MAX_KEYS);
  });

  it('remembers the text of the last assistant event', () => {
    const s = applyAll(running(), [
      ev(1, 1, 'assistant', { text: 'one' }),
      ev(1, 2, 'assistant', { text: 'two' }),
      ev(1, 3, 'assistant', { tool: 'x' }),
    ]);
    expect(s.lastAssistantText).toBe('two');
    expect(s.countsByType).toEqual({ assistant: 3 });
  });
});

describe('run state: the event verdict, decided before the ack', () => {
  const verdict = (state: RunState, event: RunEventReport) => decideEvent(state, event, { now: T0, settings }).verdict;

  it('accepts the next sequence and whatever the window and byte budget can hold', () => {
    const r = applyAll(running(), [ev(1, 1)]);
    expect(verdict(r, ev(1, 2))).toEqual({ ok: true });
    expect(verdict(r, ev(1, 2 + settings.eventBufferMax))).toEqual({ ok: true });
    expect(verdict(r, ev(1, 3 + settings.eventBufferMax))).toEqual({ ok: false, error: 'sequence_out_of_window', expected: 2, max: 7 });
    // A newer attempt starts over at 1, whatever the current attempt buffered.
    expect(verdict(r, ev(2, 6))).toEqual({ ok: true });
    expect(verdict(r, ev(2, 7))).toEqual({ ok: false, error: 'sequence_out_of_window', expected: 1, max: 6 });
  });

  it('property: every event the verdict accepts is applied or buffered, never dropped', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ sequence: fc.integer({ min: 1, max: 15 }), kb: fc.integer({ min: 0, max: 300 }) }), { maxLength: 40 }),
        (arrivals) => {
          let state = running();
          for (const { sequence, kb } of arrivals) {
            const e = ev(1, sequence, 'user', { blob: 'x'.repeat(kb * 1024) });
            const decision = decideEvent(state, e, { now: T0, settings });
            if (!decision.verdict.ok) continue;
            state = decision.next;
            expect(state.ignored.overflow).toBe(0);
            const held = state.outbox.some((o) => o.sequence === sequence) || state.buffer.some((b) => b.event.sequence === sequence);
            expect(held).toBe(true);
          }
        },
      ),
    );
  });

  it('refuses what the buffer cannot hold by bytes, and duplicates, applied or buffered', () => {
    const big = { blob: 'x'.repeat(300 * 1024) };
    const r = applyAll(running(), [ev(1, 1), ev(1, 3, 'user', big)]);
    expect(verdict(r, ev(1, 4, 'user', big))).toEqual({ ok: false, error: 'buffer_full', expected: 2, maxBufferedBytes: BUFFER_MAX_BYTES });
    // In order, it applies at once and needs no room.
    expect(verdict(r, ev(1, 2, 'user', big))).toEqual({ ok: true });
    expect(verdict(r, ev(1, 1))).toEqual({ ok: false, error: 'duplicate' });
    expect(verdict(r, ev(1, 3))).toEqual({ ok: false, error: 'duplicate' });
  });

  it('refuses attempts out of range, stale attempts, lost leases and closed runs', () => {
    const r = applyAll(running(), [ev(2, 1)]);
    expect(verdict(r, ev(3, 1))).toEqual({ ok: false, error: 'attempt_out_of_range', maxAttempts: 2 });
    expect(verdict(r, ev(1, 1))).toEqual({ ok: false, error: 'stale_attempt', status: 'running' });
    const lost = tick(r, T0 + 61_000, settings);
    expect(lost.status).toBe('failed'); // attempt 2 was the last
    expect(verdict(lost, ev(2, 2))).toEqual({ ok: false, error: 'run_closed', status: 'failed' });
    const awaiting = tick(applyAll(running(), [ev(1, 1)]), T0 + 61_000, settings);
    expect(awaiting.status).toBe('awaiting_retry');
    expect(verdict(awaiting, ev(1, 2))).toEqual({ ok: false, error: 'stale_attempt', status: 'awaiting_retry' });
    expect(verdict(awaiting, ev(2, 1))).toEqual({ ok: true });
  });

  it('a queued run takes events only for the attempt its claim started', () => {
    const q = queued();
    expect(verdict(q, ev(1, 1))).toEqual({ ok: false, error: 'not_claimed', status: 'queued' });
    const claimed = applyClaim(q, T0, settings);
    expect(verdict(claimed, ev(1, 1))).toEqual({ ok: true });
    expect(verdict(claimed, ev(2, 1))).toEqual({ ok: false, error: 'not_claimed', status: 'running' });
  });

  it("a run's events end at its terminal: nothing after a buffered terminal, no terminal below a held sequence", () => {
    const r = applyAll(running(), [ev(1, 1), ev(1, 4, 'terminal')]);
    expect(verdict(r, ev(1, 5))).toEqual({ ok: false, error: 'after_terminal', terminalSequence: 4 });
    expect(verdict(r, ev(1, 3))).toEqual({ ok: true });
    const ahead = applyAll(running(), [ev(1, 1), ev(1, 5)]);
    expect(verdict(ahead, ev(1, 2, 'terminal'))).toEqual({ ok: false, error: 'terminal_not_last', lastSequence: 5 });
    expect(verdict(ahead, ev(1, 6, 'terminal'))).toEqual({ ok: true });
  });
});

describe('run state: one decision for the Update and the signal', () => {
  const decide = (state: RunState, event: RunEventReport) => decideEvent(state, event, { now: T0, settings });
  /** What ignoring a report changes: one more signal of this execution, one more ignored under `reason`. */
  const ignoredAs = (state: RunState, reason: keyof RunState['ignored']): RunState => ({
    ...state,
    signalsThisExecution: state.signalsThisExecution + 1,
    ignored: { ...state.ignored, [reason]: state.ignored[reason] + 1 },
  });

  it('a refused report is ignored, and counted under the reason its refusal names', () => {
    const closed = applyAll(running(), [ev(1, 1, 'terminal')]);
    const second = applyAll(running(), [ev(2, 1), ev(2, 3)]);
    const awaiting = tick(applyAll(running(), [ev(1, 1)]), T0 + 61_000, settings);
    const cases: [RunState, RunEventReport, string, keyof RunState['ignored']][] = [
      [closed, ev(1, 2), 'run_closed', 'afterClose'],
      [second, ev(3, 1), 'attempt_out_of_range', 'rejected'],
      [second, ev(1, 2), 'stale_attempt', 'stale'],
      [queued(), ev(1, 1), 'not_claimed', 'stale'],
      [awaiting, ev(1, 2), 'stale_attempt', 'stale'],
    ];
    for (const [state, event, error, reason] of cases) {
      const { verdict, next } = decide(state, event);
      expect(verdict).toMatchObject({ ok: false, error });
      expect(next).toEqual(ignoredAs(state, reason));
    }
    // A duplicate of the current attempt still moves its lease (the runtime is alive).
    for (const duplicate of [ev(2, 1), ev(2, 3)]) {
      const { verdict, next } = decide(second, duplicate);
      expect(verdict).toEqual({ ok: false, error: 'duplicate' });
      expect(next).toEqual({ ...ignoredAs(second, 'duplicate'), leaseExpiresAt: T0 + 60_000 });
    }
  });

  it('a signal the verdict refuses only for room is still held, at the cost of the furthest-ahead event', () => {
    const big = { blob: 'x'.repeat(300 * 1024) };
    const held = applyAll(running(), [ev(1, 1), ev(1, 4, 'user', big)]);
    const full = decide(held, ev(1, 3, 'user', big));
    expect(full.verdict).toMatchObject({ ok: false, error: 'buffer_full' });
    expect(full.next.buffer.map((b) => b.event.sequence)).toEqual([3]);
    expect(full.next.ignored.overflow).toBe(1);
    const window = applyAll(running(), [ev(1, 1), ev(1, 3), ev(1, 4), ev(1, 5), ev(1, 6), ev(1, 7)]);
    const beyond = decide(window, ev(1, 8));
    expect(beyond.verdict).toEqual({ ok: false, error: 'sequence_out_of_window', expected: 2, max: 7 });
    expect(beyond.next.buffer.map((b) => b.event.sequence)).toEqual([3, 4, 5, 6, 7]);
    expect(beyond.next.ignored.overflow).toBe(1);
    // A terminal below a buffered event: refused as an Update, applied (ending the run) as a signal.
    const ahead = decide(applyAll(running(), [ev(1, 1), ev(1, 5)]), ev(1, 2, 'terminal'));
    expect(ahead.verdict).toEqual({ ok: false, error: 'terminal_not_last', lastSequence: 5 });
    expect(ahead.next).toMatchObject({ status: 'succeeded', eventCount: 2, buffer: [] });
  });

  it('property: an accepted event is held with nothing dropped; of refused ones only a terminal is ever applied', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            attempt: fc.integer({ min: 0, max: 3 }),
            sequence: fc.integer({ min: 1, max: 12 }),
            terminal: fc.boolean(),
            kb: fc.integer({ min: 0, max: 300 }),
          }),
          { maxLength: 40 },
        ),
        (arrivals) => {
          let state = running();
          for (const { attempt, sequence, terminal, kb } of arrivals) {
            const e = ev(attempt, sequence, terminal ? 'terminal' : 'user', { blob: 'x'.repeat(kb * 1024) });
            const { verdict, next } = decide(state, e);
            if (verdict.ok) {
              expect(next.ignored).toEqual(state.ignored);
              const held = next.outbox.includes(e) || next.buffer.some((b) => b.event === e);
              expect(held).toBe(true);
            } else {
              expect(next.outbox.length - state.outbox.length).toBeLessThanOrEqual(e.type === 'terminal' ? 1 : 0);
              if (verdict.error === 'duplicate') expect(next.ignored.duplicate).toBe(state.ignored.duplicate + 1);
            }
            state = next;
          }
        },
      ),
      { seed: 7, numRuns: 300 },
    );
  });
});

describe('run state: terminal', () => {
  it('ends the run only once every earlier sequence is applied', () => {
    let s = applyAll(running(), [ev(1, 1), ev(1, 3, 'terminal', { status: 'failed', error: 'boom' })]);
    expect(s.status).toBe('running');
    s = nextState(s, ev(1, 2), T0 + 50, settings);
    expect(s).toMatchObject({ status: 'failed', error: 'boom', endedAt: T0 + 50, leaseExpiresAt: null, eventCount: 3 });
    expect(nextDeadline(s, settings)).toBeNull();
    const after = applyAll(s, [ev(1, 4), ev(2, 1)]);
    expect(after.eventCount).toBe(3);
    expect(after.ignored.afterClose).toBe(2);
  });

  it.each([
    [{}, 'succeeded', null],
    [{ status: 'succeeded' }, 'succeeded', null],
    [{ status: 'cancelled' }, 'cancelled', null],
    [{ status: 'failed' }, 'failed', null],
    [{ status: 'weird' }, 'failed', 'invalid_terminal_status'],
  ])('terminal payload %j → %s', (payload, status, error) => {
    expect(nextState(running(), ev(1, 1, 'terminal', payload), T0, settings)).toMatchObject({ status, error });
  });

  it('drops buffered events beyond the terminal', () => {
    const s = applyAll(running(), [ev(1, 3), ev(1, 1, 'terminal')]);
    expect(s).toMatchObject({ status: 'succeeded', buffer: [], bufferBytes: 0 });
  });
});

describe('run state: a cancel request', () => {
  const member = { memberId: 'm', admin: false };
  const ask = (reason?: string) => ({ requestedAt: T0 + 5, ...(reason === undefined ? {} : { reason }) });

  it('closes a queued run cancelled at once, with who asked and why', () => {
    const q = queued();
    expect(cancelVerdict(q)).toEqual({ ok: true });
    const done = applyCancelRequest(q, { request: ask('wrong question'), caller: member }, T0 + 6);
    expect(done).toMatchObject({ status: 'cancelled', error: 'wrong question', endedAt: T0 + 6, transitions: 1 });
    expect(summaryOf(done).cancelRequested).toEqual({ at: T0 + 5, reason: 'wrong question', memberId: 'm' });
    expect(cancelVerdict(done)).toEqual({ ok: false, error: 'run_closed', status: 'cancelled' });
  });

  it('closes a run waiting for a retry at once: no runtime holds it', () => {
    const lost = tick(applyClaim(queued(), T0, settings), T0 + 60_000, settings);
    expect(applyCancelRequest(lost, { request: ask(), caller: member }, T0 + 60_001)).toMatchObject({
      status: 'cancelled',
      error: 'cancel_requested',
    });
  });

  it('records the request on a claimed run, which keeps taking reports; a repeat keeps the first', () => {
    const claimed = applyClaim(queued(), T0, settings);
    const asked = applyCancelRequest(claimed, { request: ask('stop'), caller: member }, T0 + 6);
    expect(asked).toMatchObject({ status: 'running', cancelRequested: { at: T0 + 5, reason: 'stop', memberId: 'm' } });
    expect(asked.transitions).toBe(claimed.transitions + 1);
    expect(applyCancelRequest(asked, { request: ask('again'), caller: { memberId: 'admin', admin: true } }, T0 + 7)).toBe(asked);
    const reported = nextState(
      applyHeartbeat(asked, { heartbeat: { attempt: 1, receivedAt: 0 } }, { now: T0 + 10, settings }),
      ev(1, 1, 'assistant'),
      T0 + 11,
      settings,
    );
    expect(reported).toMatchObject({ status: 'running', eventCount: 1, leaseExpiresAt: T0 + 60_011 });
    expect(summaryOf(claimed).cancelRequested).toBeUndefined();
  });

  it.each(['succeeded', 'failed', 'cancelled'])('ends cancelled at the terminal event the runtime reports as %s', (status) => {
    const asked = applyCancelRequest(applyClaim(queued(), T0, settings), { request: ask(), caller: member }, T0 + 6);
    expect(nextState(asked, ev(1, 1, 'terminal', { status }), T0 + 7, settings)).toMatchObject({
      status: 'cancelled',
      error: 'cancel_requested',
      endedAt: T0 + 7,
    });
  });

  it('ends cancelled when the lease runs out after the request, with attempts left: no retry', () => {
    const asked = applyCancelRequest(applyClaim(queued(), T0, settings), { request: ask('enough'), caller: member }, T0 + 6);
    expect(tick(asked, T0 + 59_999, settings).status).toBe('running');
    expect(tick(asked, T0 + 60_000, settings)).toMatchObject({ status: 'cancelled', error: 'enough', endedAt: T0 + 60_000 });
  });

  it('is carried through continue-as-new', () => {
    const asked = applyCancelRequest(applyClaim(queued(), T0, settings), { request: ask(), caller: member }, T0 + 6);
    const carried = initialState(
      { organizationId: 'org', runId: 'r', initialStatus: 'queued', createdAt: T0, carried: compactState(asked) },
      { now: T0, settings },
    );
    expect(carried.cancelRequested).toEqual(asked.cancelRequested);
  });
});

describe('run state: liveness', () => {
  it('heartbeats and events move the lease, never backwards', () => {
    let s = applyHeartbeat(running(), { heartbeat: { attempt: 1, receivedAt: 0 } }, { now: T0 + 1000, settings });
    expect(s.leaseExpiresAt).toBe(T0 + 61_000);
    s = nextState(s, ev(1, 1), T0 + 2000, settings);
    expect(s.leaseExpiresAt).toBe(T0 + 62_000);
    s = applyHeartbeat(s, { heartbeat: { attempt: 1, receivedAt: 0 } }, { now: T0 + 1500, settings });
    expect(s.leaseExpiresAt).toBe(T0 + 62_000);
    expect(s.lastHeartbeatAt).toBe(T0 + 1500);
  });

  it('lease lost with attempts left → awaiting_retry → failed/lease_lost after the retry window', () => {
    const s = applyAll(running(), [ev(1, 1), ev(1, 3)]);
    const lost = tick(s, T0 + 60_000, settings);
    expect(lost).toMatchObject({ status: 'awaiting_retry', retryDeadline: T0 + 360_000, leaseExpiresAt: null, buffer: [] });
    expect(nextDeadline(lost, settings)).toBe(T0 + 360_000);
    // The lost attempt cannot come back.
    const late = applyAll(lost, [ev(1, 2)]);
    expect(late).toMatchObject({ status: 'awaiting_retry', eventCount: 1 });
    expect(applyHeartbeat(lost, { heartbeat: { attempt: 1, receivedAt: 0 } }, { now: T0 + 61_000, settings }).status).toBe(
      'awaiting_retry',
    );
    expect(tick(lost, T0 + 359_999, settings).status).toBe('awaiting_retry');
    expect(tick(lost, T0 + 360_000, settings)).toMatchObject({ status: 'failed', error: 'lease_lost' });
  });

  it('a newer attempt resumes a run awaiting retry', () => {
    const lost = tick(applyAll(running(), [ev(1, 1)]), T0 + 60_000, settings);
    const resumed = applyHeartbeat(lost, { heartbeat: { attempt: 2, receivedAt: 0 } }, { now: T0 + 70_000, settings });
    expect(resumed).toMatchObject({ status: 'running', attempt: 2, nextSequence: 1, retryDeadline: null, leaseExpiresAt: T0 + 130_000 });
  });

  it('lease lost on the last attempt → failed/lease_lost at once', () => {
    const s = nextState(running(), ev(2, 1), T0, settings);
    expect(tick(s, T0 + 60_000, settings)).toMatchObject({ status: 'failed', error: 'lease_lost' });
  });

  it('a run longer than maxDuration is timed_out, whatever its lease', () => {
    let s = running();
    for (let t = T0; t < T0 + settings.maxDurationMs; t += 30_000)
      s = applyHeartbeat(s, { heartbeat: { attempt: 1, receivedAt: 0 } }, { now: t, settings });
    expect(nextDeadline(s, settings)).toBe(T0 + settings.maxDurationMs);
    expect(tick(s, T0 + settings.maxDurationMs, settings)).toMatchObject({ status: 'timed_out', error: 'max_duration_exceeded' });
  });
});

describe('run state: persistence and continue-as-new', () => {
  it('batches the outbox in order within count and byte bounds, and commits a prefix', () => {
    const s = applyAll(
      running(),
      Array.from({ length: 10 }, (_, i) => ev(1, i + 1)),
    );
    expect(outboxBatch(s, 4).map((e) => e.sequence)).toEqual([1, 2, 3, 4]);
    const big = applyAll(running(), [ev(1, 1, 'user', { x: 'y'.repeat(100) }), ev(1, 2, 'user', { x: 'y'.repeat(100) })]);
    expect(outboxBatch(big, 200, 150)).toHaveLength(1);
    expect(commitOutbox(s, 4).outbox.map((e) => e.sequence)).toEqual([5, 6, 7, 8, 9, 10]);
  });

  it('carries the compact state through continue-as-new, without persisted bodies', () => {
    const s = applyAll(running(), [ev(1, 1), ev(1, 2), ev(1, 4, 'user', { waiting: true })]);
    const backlog = applyAll(
      running(),
      Array.from({ length: CARRY_MAX_EVENTS + 1 }, (_, i) => ev(1, i + 1)),
    );
    expect(canCarry(backlog)).toBe(false);
    expect(() => compactState(backlog)).toThrow(/outbox/);
    expect(canCarry(commitOutbox(backlog, 1))).toBe(true);
    const carried = compactState(commitOutbox(s, 2));
    expect(carried.outbox).toEqual([]);
    const resumed = initialState(
      { organizationId: 'org', runId: 'r', initialStatus: 'running', createdAt: 0, carried },
      { now: T0 + 999, settings },
    );
    expect(resumed).toMatchObject({ eventCount: 2, nextSequence: 3, signalsThisExecution: 0, startedAt: T0 });
    expect(resumed.buffer.map((b) => b.event.sequence)).toEqual([4]);
    expect(nextState(resumed, ev(1, 3), T0, settings).outbox.map((e) => e.sequence)).toEqual([3, 4]);
  });

  it('summarizes for the query, the row and the workflow result', () => {
    const s = applyAll(applyClaim(queued(), T0, settings), [ev(1, 1, 'assistant', { text: 'hello' }), ev(1, 1)]);
    expect(summaryOf(s)).toEqual({
      id: 'r',
      organizationId: 'org',
      status: 'running',
      attempt: 1,
      createdAt: T0,
      startedAt: T0,
      endedAt: null,
      lastHeartbeatAt: null,
      leaseExpiresAt: T0 + 60_000,
      eventCount: 1,
      countsByType: { assistant: 1 },
      usage: {},
      error: null,
      lastAssistantText: 'hello',
      ignoredEvents: { duplicate: 1, stale: 0, rejected: 0, overflow: 0, afterClose: 0 },
      memberId: 'm',
      input: { text: 'hi' },
      claimRequired: true,
    });
  });
});

/** A coalesced answer: the lease the last forward set, and no cancel unless one was learnt. */
const coalesced = (leaseExpiresAt: number, cancelRequested = false, attempt = 1, leaseValid = true) => ({
  forward: false,
  leaseExpiresAt,
  cancelRequested,
  attempt,
  leaseValid,
});

/** A key as the heartbeat route makes one (the coalescer reads the attempt from it). */
const K = HeartbeatCoalescer.key({ organizationId: 'org-k', runId: 'run-k', attempt: 1, memberId: 'm' });

describe('heartbeat coalescer', () => {
  it('forwards once per window per key', () => {
    const c = new HeartbeatCoalescer(15_000, undefined, 0.25);
    const key = HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 1, memberId: 'm' });
    expect(c.admit(key, 0)).toEqual({ forward: true });
    c.forwarded(key, 0, { leaseTimeoutMs: 60_000 });
    for (let t = 1; t < 15_000; t += 1000) expect(c.admit(key, t)).toEqual(coalesced(60_000));
    // The next forward knows the lease the last one set.
    expect(c.admit(key, 15_000)).toEqual({ forward: true, leaseFloor: 60_000 });
    expect(c.admit(HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 2, memberId: 'm' }), 15_001)).toEqual({
      forward: true,
    });
    expect(c.admit(HeartbeatCoalescer.key({ organizationId: 'other', runId: 'run', attempt: 1, memberId: 'm' }), 15_001)).toEqual({
      forward: true,
    });
  });

  it("never answers one member's heartbeat with another's, nor before a forward succeeded", () => {
    const c = new HeartbeatCoalescer(15_000, undefined, 0.25);
    const mine = HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 1, memberId: 'me' });
    expect(c.admit(mine, 0)).toEqual({ forward: true });
    // Still in flight: the next heartbeat waits for its answer.
    expect(c.admit(mine, 1)).toEqual({ forward: false, pending: true });
    c.forwarded(mine, 0, { leaseTimeoutMs: 60_000 });
    expect(c.admit(mine, 2)).toEqual(coalesced(60_000));
    c.markClosed(mine, 'succeeded', 3);
    expect(c.admit(HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 1, memberId: 'other' }), 4)).toEqual({
      forward: true,
    });
  });

  it("answers a cancel it learnt: from the forward that read it, or from this process's cancel of that run only", () => {
    const c = new HeartbeatCoalescer(15_000, undefined, 0.25);
    const [a1, a2, b] = [
      HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 1, memberId: 'm' }),
      HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 2, memberId: 'admin' }),
      HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run-2', attempt: 1, memberId: 'm' }),
    ];
    for (const key of [a1, a2, b]) c.admit(key, 0);
    c.forwarded(a1, 0, { leaseTimeoutMs: 60_000 });
    c.forwarded(a2, 0, { leaseTimeoutMs: 60_000, cancelRequested: true });
    c.forwarded(b, 0, { leaseTimeoutMs: 60_000 });
    // Attempt 2 holds the run now: attempt 1's heartbeats are told their lease is not valid.
    expect(c.admit(a1, 1)).toEqual(coalesced(60_000, false, 2, false));
    expect(c.admit(a2, 1)).toEqual(coalesced(60_000, true, 2));
    c.noteCancelRequested('org', 'run');
    expect(c.admit(a1, 2)).toEqual(coalesced(60_000, true, 2, false));
    expect(c.admit(b, 2)).toEqual(coalesced(60_000));
    // The entry lives one window: the next heartbeat is forwarded and reads the run again.
    expect(c.admit(a1, 15_000)).toEqual({ forward: true, leaseFloor: 60_000 });
  });

  it("a cancel noticed in the process (Slack's button too) reaches every coalescer subscribed to it", () => {
    const notices = createNotices();
    const [c, d] = [new HeartbeatCoalescer(15_000, undefined, 0.25), new HeartbeatCoalescer(15_000, undefined, 0.25)];
    for (const coalescer of [c, d])
      notices.subscribe(runCancelRequested, (run) => coalescer.noteCancelRequested(run.organizationId, run.runId));
    const [mine, other] = [
      HeartbeatCoalescer.key({ organizationId: 'org-n', runId: 'run-n', attempt: 1, memberId: 'm' }),
      HeartbeatCoalescer.key({ organizationId: 'org-n', runId: 'run-o', attempt: 1, memberId: 'm' }),
    ];
    for (const coalescer of [c, d]) {
      for (const key of [mine, other]) {
        coalescer.admit(key, 0);
        coalescer.forwarded(key, 0, { leaseTimeoutMs: 60_000 });
      }
    }
    notices.publish(runCancelRequested, { organizationId: 'org-n', runId: 'run-n' });
    for (const coalescer of [c, d]) {
      expect(coalescer.admit(mine, 1)).toEqual(coalesced(60_000, true));
      expect(coalescer.admit(other, 1)).toEqual(coalesced(60_000));
    }
  });

  it("answers an older attempt's heartbeats as not holding the lease once a newer attempt is known, whichever forward came first", () => {
    const c = new HeartbeatCoalescer(15_000, undefined, 0.25);
    const at = (attempt: number, memberId = 'm') => HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt, memberId });
    // Attempt 1 forwarded first, then attempt 2: attempt 1's coalesced answers say so.
    c.admit(at(1), 0);
    c.forwarded(at(1), 0, { leaseTimeoutMs: 60_000 });
    c.admit(at(2), 1);
    c.forwarded(at(2), 1, { leaseTimeoutMs: 60_000 });
    expect(c.admit(at(1), 2)).toMatchObject({ forward: false, attempt: 2, leaseValid: false });
    // Another member's attempt-1 forward lands after that, on a row that still showed attempt 1: its answers say so too.
    c.admit(at(1, 'other'), 3);
    c.forwarded(at(1, 'other'), 3, { leaseTimeoutMs: 60_000, lease: { attempt: 1, leaseValid: true } });
    expect(c.admit(at(1, 'other'), 4)).toMatchObject({ forward: false, attempt: 2, leaseValid: false });
    expect(c.admit(at(2), 5)).toMatchObject({ forward: false, attempt: 2, leaseValid: true });
  });

  it('keys cannot collide through separators in ids', () => {
    expect(HeartbeatCoalescer.key({ organizationId: 'a/b', runId: 'c', attempt: 1, memberId: 'm' })).not.toBe(
      HeartbeatCoalescer.key({ organizationId: 'a', runId: 'b/c', attempt: 1, memberId: 'm' }),
    );
    expect(HeartbeatCoalescer.key({ organizationId: 'a', runId: 'b', attempt: 1, memberId: 'm' })).not.toBe(
      HeartbeatCoalescer.key({ organizationId: 'a', runId: 'b', attempt: 1, memberId: 'n' }),
    );
  });

  it('a failed forward is released so the next heartbeat is forwarded', () => {
    const c = new HeartbeatCoalescer(15_000, undefined, 0.25);
    expect(c.admit(K, 100).forward).toBe(true);
    c.release(K, 100);
    expect(c.admit(K, 101).forward).toBe(true);
    // A release for an older admission does not undo a newer one.
    c.release(K, 100);
    expect(c.admit(K, 102)).toEqual({ forward: false, pending: true });
    c.forwarded(K, 101, { leaseTimeoutMs: 60_000 });
    expect(c.admit(K, 103)).toEqual(coalesced(60_101));
  });

  it('remembers a closed run for the window', () => {
    const c = new HeartbeatCoalescer(1000);
    c.admit(K, 0);
    c.markClosed(K, 'succeeded', 10);
    expect(c.admit(K, 500)).toEqual({ forward: false, closedStatus: 'succeeded' });
    expect(c.admit(K, 1010)).toEqual({ forward: true });
  });

  it('sweeps stale keys so memory stays bounded', () => {
    const c = new HeartbeatCoalescer(1000, 100);
    for (let i = 0; i < 500; i++) c.admit(`k${i}`, i);
    expect(c.size).toBe(500); // none stale yet
    c.admit('late', 10_000);
    expect(c.size).toBe(1);
  });
});

describe("heartbeat coalescer: the window is the run's own", () => {
  it('takes the window as a configured fraction of the lease', () => {
    const c = new HeartbeatCoalescer(HeartbeatCoalescer.windowFor(60_000, 0.6), undefined, 0.6);
    const key = HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 1, memberId: 'm' });
    // Heartbeats every 10 s against a 60 s lease: one in four is forwarded.
    const forwarded = [0, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000, 70_000].filter((t) => {
      const admission = c.admit(key, t);
      if (admission.forward) c.forwarded(key, t, { leaseTimeoutMs: 60_000 });
      return admission.forward;
    });
    expect(forwarded).toEqual([0, 40_000]);
  });

  it("learns a forwarded run's lease and coalesces its heartbeats for a quarter of it", () => {
    const c = new HeartbeatCoalescer(15_000, undefined, 0.25);
    const key = HeartbeatCoalescer.key({ organizationId: 'org', runId: 'run', attempt: 1, memberId: 'm' });
    expect(c.admit(key, 0)).toEqual({ forward: true });
    c.forwarded(key, 0, { leaseTimeoutMs: 4_000 }); // the run's lease is 4 s, not the process's 60 s
    expect(c.admit(key, 999)).toEqual(coalesced(4_000));
    expect(c.admit(key, 1_000)).toEqual({ forward: true, leaseFloor: 4_000 });
    c.forwarded(key, 1_000, { leaseTimeoutMs: 120_000 });
    expect(c.admit(key, 29_999)).toEqual(coalesced(121_000));
    expect(c.admit(key, 31_000)).toEqual({ forward: true, leaseFloor: 121_000 });
  });
});

describe('byte budgets are UTF-8 bytes, as Temporal counts them', () => {
  const cjk = (chars: number) => '漢'.repeat(chars);

  it('counts a CJK character as 3 bytes, an emoji as 4, ASCII as 1', () => {
    expect(utf8Bytes('abc')).toBe(3);
    expect(utf8Bytes('é')).toBe(2);
    expect(utf8Bytes('漢字')).toBe(6);
    expect(utf8Bytes('🙂')).toBe(4);
    expect(utf8Bytes('漢字🙂a')).toBe(Buffer.byteLength('漢字🙂a', 'utf8'));
  });

  it('keeps the out-of-order buffer under its byte bound with CJK payloads', () => {
    let s = running();
    // Out of order (sequence 1 missing): each payload is ~150 KB of UTF-8 but only ~50K UTF-16 units.
    for (let sequence = 2; sequence <= 12; sequence++) s = nextState(s, ev(1, sequence, 'assistant', { text: cjk(50_000) }), T0, settings);
    expect(s.bufferBytes).toBeLessThanOrEqual(BUFFER_MAX_BYTES);
    expect(s.buffer.reduce((n, b) => n + Buffer.byteLength(JSON.stringify(b.event.payload), 'utf8'), 0)).toBe(s.bufferBytes);
  });

  it('the worst carried state (full buffer, full carried remainder, largest assistant text) fits one budget', () => {
    const wide = { ...settings, eventBufferMax: 1000 };
    let s = nextState(running(), ev(1, 1, 'assistant', { text: cjk(80_000) }), T0, wide); // the largest event body
    // A full carryable remainder of CJK events …
    while (canCarry(s)) s = nextState(s, ev(1, s.nextSequence, 'user', { text: cjk(20_000) }), T0, wide);
    s = commitOutbox(s, 1);
    expect(canCarry(s)).toBe(true);
    // … and a full out-of-order buffer.
    for (let k = 2; k < 40; k++) s = nextState(s, ev(1, s.nextSequence + k, 'user', { text: cjk(20_000) }), T0, wide);
    expect(s.bufferBytes).toBeGreaterThan(BUFFER_MAX_BYTES - 70_000);
    expect(carriedBytes(s)).toBeLessThanOrEqual(CARRIED_STATE_MAX_BYTES);
  });
});
