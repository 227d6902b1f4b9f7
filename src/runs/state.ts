/**
 * The automation-run actor's logic as pure functions: (state, input, { now, settings }) → state.
 * No Temporal calls, no clocks of its own, so it is deterministic for the workflow and
 * unit-testable without a worker (test/runs/state.test.ts). workflows/runs.ts only wires these
 * to signals, Updates, timers and the persistence activity.
 *
 * Rules:
 * - Events of the current attempt are applied strictly in `sequence` order, starting at 1.
 *   Out-of-order events wait in a bounded buffer; one the buffer could not hold is refused
 *   before the ack (decideEvent's verdict), never dropped after.
 * - A repeated (attempt, sequence) is ignored; so are older attempts, attempts above
 *   `maxAttempts`, and the current attempt once its lease is lost (a lease, once lost, is lost).
 * - The first event or heartbeat of a newer attempt starts it: sequence restarts at 1 and the
 *   old attempt's buffered events are dropped.
 * - Every heartbeat or event of the current attempt moves the lease to now + leaseTimeout.
 * - A `terminal` event ends the run once every earlier sequence of its attempt is applied.
 */
import { utf8Bytes } from '../app/utf8';
import {
  type RunCancelRequest,
  type RunCaller,
  type RunEventReport,
  type RunEventType,
  type RunFailureKind,
  type RunHeartbeat,
  type RunIgnoredCounts,
  type RunSettings,
  type RunStatus,
  type RunSummary,
  type RunWorkflowInput,
  RUN_FAILURE_KINDS,
  TERMINAL_EVENT_STATUSES,
  isClosedRunStatus,
} from './contract';

/**
 * Out-of-order events are bounded by count (settings.eventBufferMax) and by payload bytes, so
 * the state carried through continue-as-new stays well under Temporal's 2 MB payload limit.
 */
export const BUFFER_MAX_BYTES = 512 * 1024;
/** Distinct `usage` keys kept; more would let one run grow its state without bound. */
export const USAGE_MAX_KEYS = 64;
const USAGE_KEY_MAX_LENGTH = 100;
/** The error of a run cancelled with no reason given. */
const CANCEL_REQUESTED = 'cancel_requested';

interface BufferedEvent {
  event: RunEventReport;
  bytes: number;
}

export interface RunState {
  organizationId: string;
  runId: string;
  status: RunStatus;
  /** 0 until the first report names one. */
  attempt: number;
  /** The next sequence of the current attempt that may be applied. */
  nextSequence: number;
  createdAt: number;
  startedAt: number | null;
  endedAt: number | null;
  lastHeartbeatAt: number | null;
  leaseExpiresAt: number | null;
  /** While `awaiting_retry`: when the run gives up waiting for a newer attempt. */
  retryDeadline: number | null;
  eventCount: number;
  countsByType: Partial<Record<RunEventType, number>>;
  usage: Record<string, number>;
  error: string | null;
  lastAssistantText: string | null;
  /** Out-of-order events of the current attempt, sorted by sequence, no two equal. */
  buffer: BufferedEvent[];
  bufferBytes: number;
  /** Applied events not yet persisted, in order. Emptied by the persistence activity. */
  outbox: RunEventReport[];
  ignored: RunIgnoredCounts;
  /** Signals received by this execution (continue-as-new threshold). Reset by continue-as-new. */
  signalsThisExecution: number;
  /** Bumped by every status or attempt change: the liveness loop and the table sync watch it. */
  transitions: number;
  /** Monotonic version of the `automation_runs` row (guards against out-of-order writes). */
  syncVersion: number;
  memberId?: string;
  origin?: RunWorkflowInput['origin'];
  input?: RunWorkflowInput['input'];
  /**
   * Queued runs (Slack routing) start attempts only through the claim Update, which decides
   * between concurrent runtimes; reports never start or switch an attempt of such a run.
   * Absent in states carried by executions that predate claims: those behave as before.
   */
  claimRequired?: boolean;
  /** A member's or admin's request to stop the run (applyCancelRequest); absent until one is made. */
  cancelRequested?: RunCancelRecord;
  /** A run a terminal event ended `failed`: what failed (runFailureOf); absent otherwise. */
  failure?: RunFailureKind;
}

/** Who asked the run to stop, when and why: the summary shows it, the heartbeat reply tells the runtime. */
export type RunCancelRecord = NonNullable<RunSummary['cancelRequested']>;

export type RunStateInput = Pick<
  RunWorkflowInput,
  'organizationId' | 'runId' | 'initialStatus' | 'createdAt' | 'memberId' | 'origin' | 'input' | 'carried'
>;

export const isClosed = (state: RunState): boolean => isClosedRunStatus(state.status);

const zeroIgnored = (): RunIgnoredCounts => ({ duplicate: 0, stale: 0, rejected: 0, overflow: 0, afterClose: 0 });

/** When a change is applied (the workflow's clock, ms), and the run's settings it is applied under. */
export interface RunMoment {
  now: number;
  settings: RunSettings;
}

/** The state a run starts with, or the compact state carried through continue-as-new. */
/**
 * `claims`: whether a queued run takes attempts only from claims. The workflow passes
 * `patched(RUN_CLAIMS_PATCH)`, so runs started before claims existed replay as they ran.
 */
export function initialState(input: RunStateInput, { now, settings }: RunMoment, claims = true): RunState {
  if (isRunState(input.carried)) return { ...input.carried, signalsThisExecution: 0 };
  const running = input.initialStatus === 'running';
  return {
    organizationId: input.organizationId,
    runId: input.runId,
    status: input.initialStatus,
    attempt: 0,
    nextSequence: 1,
    createdAt: input.createdAt,
    startedAt: running ? now : null,
    endedAt: null,
    lastHeartbeatAt: null,
    leaseExpiresAt: running ? now + settings.leaseTimeoutMs : null,
    retryDeadline: null,
    eventCount: 0,
    countsByType: {},
    usage: {},
    error: null,
    lastAssistantText: null,
    buffer: [],
    bufferBytes: 0,
    outbox: [],
    ignored: zeroIgnored(),
    signalsThisExecution: 0,
    transitions: 0,
    syncVersion: 0,
    ...(input.memberId !== undefined ? { memberId: input.memberId } : {}),
    ...(input.origin !== undefined ? { origin: input.origin } : {}),
    ...(input.input !== undefined ? { input: input.input } : {}),
    ...(running || !claims ? {} : { claimRequired: true }),
  };
}

function isRunState(value: unknown): value is RunState {
  const v = value as Partial<RunState> | undefined;
  return !!v && typeof v === 'object' && typeof v.status === 'string' && Array.isArray(v.buffer) && Array.isArray(v.outbox);
}

/** Unpersisted events continue-as-new may carry (what arrives during about one activity round trip). */
export const CARRY_MAX_EVENTS = 200;
const CARRY_MAX_BYTES = 256 * 1024;

/** Whether the unpersisted remainder is small enough to travel in the continue-as-new input. */
export function canCarry(state: RunState): boolean {
  return state.outbox.length === 0 || outboxBatch(state, CARRY_MAX_EVENTS, CARRY_MAX_BYTES).length === state.outbox.length;
}

/** The carried state's size in UTF-8 bytes (test/runs/state.test.ts checks the worst case fits). */
export const carriedBytes = (state: RunState): number => utf8Bytes(JSON.stringify(compactState(state)));

/**
 * What continue-as-new carries: counters, the out-of-order buffer and the few applied events
 * not yet persisted (bounded by canCarry); never the bodies already persisted.
 */
export function compactState(state: RunState): RunState {
  if (!canCarry(state)) throw new Error('persist the outbox down to a carryable remainder before continuing as new');
  return { ...state, signalsThisExecution: 0 };
}

const ignore = (state: RunState, reason: keyof RunIgnoredCounts): RunState => ({
  ...state,
  ignored: { ...state.ignored, [reason]: state.ignored[reason] + 1 },
});

/** The refusals that depend on a report's attempt alone; a heartbeat is ignored by the same rules, with nothing to answer. */
type AttemptRefusal = Extract<EventRefusal, { error: 'run_closed' | 'attempt_out_of_range' | 'stale_attempt' | 'not_claimed' }>;

type AttemptVerdict = { admitted: true; state: RunState } | { admitted: false; state: RunState; refusal: AttemptRefusal };

/** A report the run ignores: counted under `reason`, and refused (before any ack) with `refusal`. */
const refuseAttempt = (state: RunState, reason: keyof RunIgnoredCounts, refusal: AttemptRefusal): AttemptVerdict => ({
  admitted: false,
  state: ignore(state, reason),
  refusal,
});

/**
 * Decides what a report of `attempt` means for the run: claim a queued run, start a newer
 * attempt, extend the current one, or be ignored (with the reason it is counted under and the
 * refusal the API answers).
 */
function admitAttempt(state: RunState, attempt: number, { now, settings }: RunMoment): AttemptVerdict {
  const { status } = state;
  if (isClosed(state)) return refuseAttempt(state, 'afterClose', { ok: false, error: 'run_closed', status });
  if (attempt > settings.maxAttempts) {
    return refuseAttempt(state, 'rejected', { ok: false, error: 'attempt_out_of_range', maxAttempts: settings.maxAttempts });
  }
  if (attempt < state.attempt) return refuseAttempt(state, 'stale', { ok: false, error: 'stale_attempt', status });
  // Only a claim starts an attempt of a claim-required run.
  if (state.claimRequired && (status === 'queued' || attempt !== state.attempt)) {
    return refuseAttempt(state, 'stale', { ok: false, error: 'not_claimed', status });
  }
  const lease = now + settings.leaseTimeoutMs;
  if (attempt > state.attempt || state.status === 'queued') {
    // A claim of a queued run, or a newer attempt: sequences restart and the old attempt's
    // out-of-order events can never apply.
    return {
      admitted: true,
      state: {
        ...state,
        status: 'running',
        attempt,
        nextSequence: 1,
        buffer: [],
        bufferBytes: 0,
        startedAt: state.startedAt ?? now,
        leaseExpiresAt: lease,
        retryDeadline: null,
        transitions: state.transitions + 1,
      },
    };
  }
  // Same attempt. Once its lease is lost the run only waits for a newer attempt.
  if (status === 'awaiting_retry') return refuseAttempt(state, 'stale', { ok: false, error: 'stale_attempt', status });
  return { admitted: true, state: { ...state, leaseExpiresAt: Math.max(state.leaseExpiresAt ?? 0, lease) } };
}

export type ClaimVerdict = { ok: true } | { ok: false; error: 'already_claimed' | 'run_closed'; status: RunStatus };

/** Whether a claim may start the next attempt now: the run waits for one (queued, or after a lost lease). */
export function claimVerdict(state: RunState): ClaimVerdict {
  if (isClosed(state)) return { ok: false, error: 'run_closed', status: state.status };
  if (state.status === 'queued' || state.status === 'awaiting_retry') return { ok: true };
  return { ok: false, error: 'already_claimed', status: state.status };
}

/**
 * What the API answers for an event: `ok` is acked (200), a refusal is answered with its error
 * and never reaches the history. `duplicate` is a refusal too: the event is already applied or
 * buffered, so the API answers it 200 without growing the history.
 */
type EventVerdict =
  | { ok: true }
  | { ok: false; error: 'duplicate' }
  | { ok: false; error: 'run_closed'; status: RunStatus }
  | { ok: false; error: 'attempt_out_of_range'; maxAttempts: number }
  | { ok: false; error: 'stale_attempt' | 'not_claimed'; status: RunStatus }
  | { ok: false; error: 'sequence_out_of_window'; expected: number; max: number }
  | { ok: false; error: 'buffer_full'; expected: number; maxBufferedBytes: number }
  | { ok: false; error: 'after_terminal'; terminalSequence: number }
  | { ok: false; error: 'terminal_not_last'; lastSequence: number };

export type EventRefusal = Exclude<EventVerdict, { ok: true }>;

/**
 * The run's one rule for an event report. `verdict` is what the `reportRunEvent` Update's
 * validator answers before the ack; `next` is the state once the event is taken in: by the
 * Update's handler after an `ok` verdict, or by the `runEvent` signal (histories recorded before
 * the Update) whatever the verdict. An event the verdict accepts is applied, or buffered with
 * room for it, so an ack never precedes a drop; a signal the verdict would refuse is ignored
 * (counted by reason) or, if it only lacks room, buffered at the cost of the furthest-ahead event.
 */
export interface EventDecision {
  verdict: EventVerdict;
  next: RunState;
}

export function decideEvent(state: RunState, event: RunEventReport, at: RunMoment): EventDecision {
  const { now, settings } = at;
  const admission = admitAttempt({ ...state, signalsThisExecution: state.signalsThisExecution + 1 }, event.attempt, at);
  if (!admission.admitted) return { verdict: admission.refusal, next: admission.state };
  const admitted = admission.state;
  const expected = admitted.nextSequence;
  const index = lowerBound(admitted.buffer, event.sequence);
  // The buffer only holds sequences above the next one, so an event found there is a duplicate.
  if (event.sequence < expected || admitted.buffer[index]?.event.sequence === event.sequence) {
    return { verdict: { ok: false, error: 'duplicate' }, next: ignore(admitted, 'duplicate') };
  }
  const verdict = roomVerdict(admitted, event, settings);
  if (event.sequence === expected) return { verdict, next: applyWithBuffered(admitted, event, now) };
  return { verdict, next: bufferEvent(admitted, { event, index }, settings) };
}

/**
 * Whether a new event of the admitted attempt fits what the run still holds: nothing after a
 * buffered terminal, no terminal below a buffered event, and an out-of-order event only within
 * the buffer's window and byte budget as it will be.
 */
function roomVerdict(state: RunState, event: RunEventReport, settings: RunSettings): EventVerdict {
  const expected = state.nextSequence;
  const last = state.buffer.at(-1)?.event;
  if (event.type === 'terminal' && last !== undefined && last.sequence > event.sequence) {
    return { ok: false, error: 'terminal_not_last', lastSequence: last.sequence };
  }
  const terminal = state.buffer.find((entry) => entry.event.type === 'terminal')?.event;
  if (terminal !== undefined && event.sequence > terminal.sequence) {
    return { ok: false, error: 'after_terminal', terminalSequence: terminal.sequence };
  }
  if (event.sequence === expected) return { ok: true };
  // The window (expected, expected + eventBufferMax] holds at most eventBufferMax distinct
  // sequences, so an event inside it never overflows the buffer by count.
  const max = expected + settings.eventBufferMax;
  if (event.sequence > max) return { ok: false, error: 'sequence_out_of_window', expected, max };
  if (state.bufferBytes + payloadBytes(event) > BUFFER_MAX_BYTES) {
    return { ok: false, error: 'buffer_full', expected, maxBufferedBytes: BUFFER_MAX_BYTES };
  }
  return { ok: true };
}

/** A claim: the next attempt starts now, with a fresh lease (call only after claimVerdict said ok). */
export function applyClaim(state: RunState, now: number, settings: RunSettings): RunState {
  return {
    ...state,
    status: 'running',
    attempt: state.attempt + 1,
    nextSequence: 1,
    buffer: [],
    bufferBytes: 0,
    startedAt: state.startedAt ?? now,
    leaseExpiresAt: now + settings.leaseTimeoutMs,
    retryDeadline: null,
    claimRequired: true,
    transitions: state.transitions + 1,
  };
}

/**
 * Whether a caller may reach the run: its owner (the member whose report or Slack invocation
 * started it), or an owner or admin of the organization. A run without an owner is reached only
 * by admins; a report without a caller predates this rule and is taken as it was.
 */
export function callerMayReach(state: RunState, caller: RunCaller | undefined): boolean {
  return caller === undefined || caller.admin || caller.memberId === state.memberId;
}

/** A heartbeat, and who sent it (none: taken as it was before callers were checked). */
export interface CallerHeartbeat {
  heartbeat: RunHeartbeat;
  caller?: RunCaller;
}

/** A heartbeat from a caller who may not reach the run is counted as a signal and changes nothing else. */
export function applyHeartbeat(state: RunState, { heartbeat, caller }: CallerHeartbeat, at: RunMoment): RunState {
  const counted = { ...state, signalsThisExecution: state.signalsThisExecution + 1 };
  if (!callerMayReach(state, caller)) return counted;
  const admitted = admitAttempt(counted, heartbeat.attempt, at);
  if (!admitted.admitted) return admitted.state;
  return { ...admitted.state, lastHeartbeatAt: at.now };
}

/** A payload's JSON size in UTF-8 bytes, for every byte budget that guards a Temporal payload. */
function payloadBytes(event: RunEventReport): number {
  return utf8Bytes(JSON.stringify(event.payload ?? {}));
}

/**
 * One budget over everything continue-as-new carries (counters, the buffer, the unpersisted
 * remainder, the last assistant text), well under Temporal's 2 MB payload limit. The parts have
 * byte bounds of their own (buffer, carried remainder, event body), so their sum stays under it.
 */
export const CARRIED_STATE_MAX_BYTES = 1536 * 1024;

/** Applies the next event in order, then every buffered event the gap was holding back. */
function applyWithBuffered(state: RunState, event: RunEventReport, now: number): RunState {
  let next = applyInOrder(state, event, now);
  while (!isClosed(next) && next.buffer.length > 0 && next.buffer[0]!.event.sequence === next.nextSequence) {
    const [head, ...rest] = next.buffer;
    next = applyInOrder({ ...next, buffer: rest, bufferBytes: next.bufferBytes - head!.bytes }, head!.event, now);
  }
  return next;
}

/** An out-of-order event, and the index in the buffer (ordered by sequence) where it goes. */
interface BufferPlacement {
  event: RunEventReport;
  index: number;
}

/** Holds an out-of-order event at `index`; when full, drops the furthest-ahead events, the last that could apply. */
function bufferEvent(state: RunState, { event, index }: BufferPlacement, settings: RunSettings): RunState {
  const entry = { event, bytes: payloadBytes(event) };
  const buffer = [...state.buffer.slice(0, index), entry, ...state.buffer.slice(index)];
  let bytes = state.bufferBytes + entry.bytes;
  let dropped = 0;
  while (buffer.length > 0 && (buffer.length > settings.eventBufferMax || bytes > BUFFER_MAX_BYTES)) {
    bytes -= buffer.pop()!.bytes;
    dropped += 1;
  }
  return {
    ...state,
    buffer,
    bufferBytes: bytes,
    ignored: dropped > 0 ? { ...state.ignored, overflow: state.ignored.overflow + dropped } : state.ignored,
  };
}

function lowerBound(buffer: BufferedEvent[], sequence: number): number {
  let lo = 0;
  let hi = buffer.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (buffer[mid]!.event.sequence < sequence) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function applyInOrder(state: RunState, event: RunEventReport, now: number): RunState {
  const next: RunState = {
    ...state,
    nextSequence: event.sequence + 1,
    eventCount: state.eventCount + 1,
    countsByType: { ...state.countsByType, [event.type]: (state.countsByType[event.type] ?? 0) + 1 },
    outbox: [...state.outbox, event],
  };
  if (event.type === 'usage') next.usage = addUsage(state.usage, event.payload);
  if (event.type === 'assistant' && typeof event.payload.text === 'string') next.lastAssistantText = event.payload.text;
  if (event.type !== 'terminal') return next;
  // Asked to stop: whatever the runtime reports at its end, the run ends as the member asked.
  if (state.cancelRequested) return closeRun(next, { status: 'cancelled', error: state.cancelRequested.reason ?? CANCEL_REQUESTED }, now);
  const requested = event.payload.status;
  const status: RunStatus =
    requested === undefined
      ? 'succeeded'
      : (TERMINAL_EVENT_STATUSES as readonly unknown[]).includes(requested)
        ? (requested as RunStatus)
        : 'failed';
  const error =
    typeof event.payload.error === 'string'
      ? event.payload.error
      : status === 'failed' && requested !== 'failed'
        ? 'invalid_terminal_status'
        : null;
  const closed = closeRun(next, { status, error }, now);
  return status === 'failed' ? { ...closed, failure: runFailureOf(event.payload, next.lastAssistantText) } : closed;
}

/**
 * What failed, for a failed terminal: as its runtime says (`payload.failure`), else `task` when the
 * run answered (an `assistant` text that is not blank, or a `result`) and `runtime` when it did not.
 */
function runFailureOf(payload: Record<string, unknown>, lastAssistantText: string | null): RunFailureKind {
  if ((RUN_FAILURE_KINDS as readonly unknown[]).includes(payload.failure)) return payload.failure as RunFailureKind;
  return (lastAssistantText ?? '').trim() !== '' || payload.result !== undefined ? 'task' : 'runtime';
}

/** Sums the finite numeric top-level fields of a `usage` payload into the run's totals. */
export function addUsage(usage: Record<string, number>, payload: Record<string, unknown>): Record<string, number> {
  const totals = { ...usage };
  for (const [key, value] of Object.entries(payload)) {
    if (typeof value !== 'number' || !Number.isFinite(value)) continue;
    // `__proto__` would reach the prototype, not a field; long or endless keys would bloat state.
    if (key === '__proto__' || key.length > USAGE_KEY_MAX_LENGTH) continue;
    const known = Object.prototype.hasOwnProperty.call(totals, key);
    if (!known && Object.keys(totals).length >= USAGE_MAX_KEYS) continue;
    totals[key] = (known ? totals[key]! : 0) + value;
  }
  return totals;
}

/** How a run closes: its status, and the error it records (null for none). */
interface Closing {
  status: RunStatus;
  error: string | null;
}

function closeRun(state: RunState, { status, error }: Closing, now: number): RunState {
  return {
    ...state,
    status,
    error,
    endedAt: now,
    leaseExpiresAt: null,
    retryDeadline: null,
    buffer: [],
    bufferBytes: 0,
    transitions: state.transitions + 1,
  };
}

/**
 * An operator's cancel (Web UI, `temporal workflow cancel`, a cancelled parent): the run ends
 * `cancelled`. A run that already ended keeps its outcome.
 */
export function applyCancel(state: RunState, now: number): RunState {
  return isClosed(state) ? state : closeRun(state, { status: 'cancelled', error: CANCEL_REQUESTED }, now);
}

export type CancelVerdict = { ok: true } | { ok: false; error: 'run_closed'; status: RunStatus };

/** Whether a cancel request may be taken (its caller checked apart): any run that has not ended. */
export function cancelVerdict(state: RunState): CancelVerdict {
  return isClosed(state) ? { ok: false, error: 'run_closed', status: state.status } : { ok: true };
}

/**
 * A member's or admin's request to stop the run (call only after cancelVerdict said ok). A run no
 * runtime holds (queued, or waiting for a retry) closes `cancelled` at once; a running one records
 * the request, which its runtime learns from the heartbeat reply, and ends `cancelled` at its
 * terminal event or when its lease runs out. A repeated request keeps the first.
 */
/** A request to stop the run, and the member or admin who sent it. */
export interface CallerCancelRequest {
  request: RunCancelRequest;
  caller: RunCaller;
}

export function applyCancelRequest(state: RunState, { request, caller }: CallerCancelRequest, now: number): RunState {
  if (isClosed(state) || state.cancelRequested) return state;
  const record: RunCancelRecord = { at: request.requestedAt, reason: request.reason ?? null, memberId: caller.memberId };
  const asked = { ...state, cancelRequested: record };
  if (state.status !== 'running') return closeRun(asked, { status: 'cancelled', error: record.reason ?? CANCEL_REQUESTED }, now);
  return { ...asked, transitions: state.transitions + 1 };
}

/** The next moment at which `tick` would change the run, or null if only a report can. */
export function nextDeadline(state: RunState, settings: RunSettings): number | null {
  switch (state.status) {
    case 'queued':
      return state.createdAt + settings.claimDeadlineMs;
    case 'running':
      return Math.min(state.leaseExpiresAt ?? Infinity, maxDurationDeadline(state, settings));
    case 'awaiting_retry':
      return Math.min(state.retryDeadline ?? Infinity, maxDurationDeadline(state, settings));
    default:
      return null;
  }
}

/**
 * Whether the liveness loop, whose timer is set for `armed`, should set it again for the run's
 * deadline now: once a heartbeat or an event moved that deadline later by at least a quarter of
 * the lease. The timer then fires when the lease really ends, not at an end a forwarded heartbeat
 * already moved (one workflow task fewer per forward), while a stream of events, each moving the
 * lease a little, re-arms it at most about four times a lease.
 */
export function deadlineMovedOn(state: RunState, armed: number, settings: RunSettings): boolean {
  const next = nextDeadline(state, settings);
  return next !== null && next - armed >= settings.leaseTimeoutMs / 4;
}

const maxDurationDeadline = (state: RunState, settings: RunSettings) => (state.startedAt ?? state.createdAt) + settings.maxDurationMs;

/** Applies every deadline that has passed at `now`: claim, max duration, lease, retry window. */
export function tick(state: RunState, now: number, settings: RunSettings): RunState {
  switch (state.status) {
    case 'queued':
      return now >= state.createdAt + settings.claimDeadlineMs
        ? closeRun(state, { status: 'skipped', error: 'runner_unavailable' }, now)
        : state;
    case 'running':
    case 'awaiting_retry': {
      if (now >= maxDurationDeadline(state, settings)) return closeRun(state, { status: 'timed_out', error: 'max_duration_exceeded' }, now);
      if (state.status === 'running' && state.leaseExpiresAt !== null && now >= state.leaseExpiresAt) {
        // Asked to stop and no longer heard from: the runtime stopped, so no retry.
        if (state.cancelRequested)
          return closeRun(state, { status: 'cancelled', error: state.cancelRequested.reason ?? CANCEL_REQUESTED }, now);
        if (state.attempt < settings.maxAttempts) {
          return {
            ...state,
            status: 'awaiting_retry',
            retryDeadline: now + settings.retryWindowMs,
            leaseExpiresAt: null,
            buffer: [],
            bufferBytes: 0,
            transitions: state.transitions + 1,
          };
        }
        return closeRun(state, { status: 'failed', error: 'lease_lost' }, now);
      }
      if (state.status === 'awaiting_retry' && state.retryDeadline !== null && now >= state.retryDeadline) {
        return closeRun(state, { status: 'failed', error: 'lease_lost' }, now);
      }
      return state;
    }
    default:
      return state;
  }
}

/** Removes the first `count` outbox events once the activity has persisted them. */
export function commitOutbox(state: RunState, count: number): RunState {
  return { ...state, outbox: state.outbox.slice(count) };
}

/** The next batch to persist: in order, bounded by count and payload bytes (activity inputs are payloads too). */
export function outboxBatch(state: RunState, maxCount = 200, maxBytes = 512 * 1024): RunEventReport[] {
  const batch: RunEventReport[] = [];
  let bytes = 0;
  for (const event of state.outbox) {
    const size = payloadBytes(event);
    if (batch.length > 0 && (batch.length >= maxCount || bytes + size > maxBytes)) break;
    batch.push(event);
    bytes += size;
  }
  return batch;
}

export function summaryOf(state: RunState): RunSummary {
  return {
    id: state.runId,
    organizationId: state.organizationId,
    status: state.status,
    attempt: state.attempt,
    createdAt: state.createdAt,
    startedAt: state.startedAt,
    endedAt: state.endedAt,
    lastHeartbeatAt: state.lastHeartbeatAt,
    leaseExpiresAt: state.leaseExpiresAt,
    eventCount: state.eventCount,
    countsByType: { ...state.countsByType },
    usage: { ...state.usage },
    error: state.error,
    lastAssistantText: state.lastAssistantText,
    ignoredEvents: { ...state.ignored },
    ...(state.memberId !== undefined ? { memberId: state.memberId } : {}),
    ...(state.origin !== undefined ? { origin: state.origin } : {}),
    ...(state.input !== undefined ? { input: state.input } : {}),
    ...(state.claimRequired ? { claimRequired: true } : {}),
    ...(state.cancelRequested ? { cancelRequested: { ...state.cancelRequested } } : {}),
    ...(state.failure !== undefined ? { failure: state.failure } : {}),
  };
}

/** Applied events not yet in Postgres: the live query reports it, so the API can refuse more. */
export function unpersistedOf(state: RunState): { events: number; bytes: number } {
  return { events: state.outbox.length, bytes: state.outbox.reduce((sum, event) => sum + payloadBytes(event), 0) };
}
