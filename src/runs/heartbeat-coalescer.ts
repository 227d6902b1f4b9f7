/**
 * Heartbeat coalescing: a process answers most heartbeats of (run, attempt, member) from memory and
 * forwards one to Temporal only when the lease needs it, so Temporal load grows with the number of
 * runs, not with the number of heartbeats.
 *
 * The rule (`mayAnswerFromMemory`): a heartbeat is answered from memory only while the lease the
 * last forward set still outlasts the caller's next heartbeat by a margin (`coalesceMarginMs`: an
 * eighth of the lease, or half an interval and a sixteenth of the lease if that is more, and never
 * under two seconds, the time a signal may take on a busy engine). The next
 * heartbeat is expected after the largest of the caller's last few gaps (`Cadence`), learnt per
 * key, since a runtime picks its own interval and `den runtime` sends a failed heartbeat again after
 * half of one. So the heartbeat that is forwarded is the last one before the lease gets that
 * tight, and a forward always has at least the margin left to land: a runtime that beats at least
 * every third of its lease never loses it to coalescing, whatever the lease. At 10 s against a
 * 60 s lease one heartbeat in five is forwarded, 10 s before the lease ends; at 20 s against 60 s,
 * one in two; at 1 s against 3 s, every one (the two-second floor), each with 2 s left to land.
 *
 * RUN_HEARTBEAT_COALESCE_FRACTION is a cap on top: no answer from memory rests on a forward older
 * than that fraction of the run's lease (0.7 by default), so a cancel taken by another process is
 * learnt within it, and a caller with a very short interval still reaches the run.
 *
 * Answers from memory go only to a member whose own forward succeeded within the window, which is
 * when the API checked that the member may reach the run; while that forward is in flight the others
 * are `pending` and share its answer. If a forward fails, `release` forgets it, so the next one is
 * forwarded.
 *
 * Two more things it remembers for the forward path: the least lease its forwards are known to
 * have set (`leaseFloor`, kept past the window, so the next forward knows how long it may take
 * before that lease runs out), and a refusal for the time its Retry-After names (a run refused
 * its start, beyond capacity or past its organization's share, asks again without costing a
 * Postgres read or a Temporal call).
 * Pure and clock-injected: it knows nothing of HTTP or Temporal.
 */
import { boundedCache } from '../app/bounded-caches';
export interface HeartbeatAnswer {
  leaseExpiresAt: number;
  cancelRequested: boolean;
  /** The run's current attempt, as the last forward learnt it. */
  attempt: number;
  /** Whether the heartbeat's attempt holds the run's lease, as the last forward learnt it. */
  leaseValid: boolean;
}

/**
 * What the coalescer decides for one heartbeat: forward it (with the least lease this process knows
 * it holds), wait for the forward in flight, or answer from what it knows (an answer, a closed run,
 * or a refusal still in force).
 */
export type HeartbeatVerdict =
  | { forward: true; leaseFloor?: number }
  | { forward: false; pending: true }
  | { forward: false; closedStatus: string }
  | { forward: false; refusal: unknown }
  | ({ forward: false } & HeartbeatAnswer);

/** The gaps between a caller's last heartbeats: how soon its next one is due. */
export interface Cadence {
  lastAt: number;
  /** The newest gaps, at most CADENCE_GAPS of them. */
  gaps: number[];
}

/** Enough gaps to see a full interval past a resent heartbeat (half an interval) or two. */
const CADENCE_GAPS = 4;

/** The cadence with one more heartbeat, received at `now`. */
export function observeHeartbeat(cadence: Cadence | undefined, now: number): Cadence {
  if (!cadence) return { lastAt: now, gaps: [] };
  const gaps = [...cadence.gaps, Math.max(0, now - cadence.lastAt)].slice(-CADENCE_GAPS);
  return { lastAt: Math.max(now, cadence.lastAt), gaps };
}

/** How long after its last heartbeat the caller's next one is due: the largest recent gap (none yet: unknown). */
export function expectedGapMs(cadence: Cadence | undefined): number | undefined {
  return cadence && cadence.gaps.length > 0 ? Math.max(...cadence.gaps) : undefined;
}

/**
 * The least time a forward is ever given to land, whatever the lease: a signal through Temporal on
 * an engine the rest of the machine keeps busy can take most of a second (a forward with 0.85 s
 * left was answered 503 on two cores running the whole test suite). Only leases under 16 s feel it.
 */
const MIN_LANDING_MS = 2_000;

/**
 * What a lease must still hold after the caller's next heartbeat for this one to be answered from
 * memory. It is the least time a forward ever has to land, so it covers one failed forward sent
 * again half an interval later (as `den runtime` does) and that one's landing, a sixteenth of the
 * lease; never less than an eighth of the lease, the most a heartbeat may come late; and never
 * less than MIN_LANDING_MS.
 */
export function coalesceMarginMs(leaseTimeoutMs: number, gapMs: number): number {
  return Math.floor(Math.max(leaseTimeoutMs / 8, gapMs / 2 + leaseTimeoutMs / 16, MIN_LANDING_MS));
}

/** A lease as the last forward learnt it: when it ends (ms), and the run's lease timeout. */
export interface KnownLease {
  leaseExpiresAt: number;
  leaseTimeoutMs: number;
}

/**
 * Whether a heartbeat at `now` may be answered with a lease that ends at `leaseExpiresAt`: only
 * while that lease outlasts the caller's next heartbeat by the margin. A caller whose cadence is not
 * known yet is forwarded.
 */
export function mayAnswerFromMemory({ leaseExpiresAt, leaseTimeoutMs }: KnownLease, now: number, cadence: Cadence | undefined): boolean {
  const gap = expectedGapMs(cadence);
  if (gap === undefined) return false;
  return leaseExpiresAt - (now + gap) >= coalesceMarginMs(leaseTimeoutMs, gap);
}

/** A refusal the coalescer repeats without forwarding, until `until` (ms; its Retry-After). */
export interface HeldRefusal {
  error: unknown;
  until: number;
}

/** Whose heartbeats share an answer: one member's heartbeats of one attempt of one run. */
export interface HeartbeatSender {
  organizationId: string;
  runId: string;
  attempt: number;
  memberId: string;
}

/**
 * What a successful forward learnt: the run's own lease timeout, whether a cancel was requested
 * (default no), and the lease as the run sees it (default: this key's attempt holds it).
 */
export interface ForwardAnswer {
  leaseTimeoutMs: number;
  cancelRequested?: boolean;
  lease?: { attempt: number; leaseValid: boolean };
}

interface Entry {
  at: number;
  /** The cap: how long after a forward an answer may rest on it (a fraction of the run's lease). */
  windowMs: number;
  /** A forward of this key succeeded: the caller may reach the run, so its answer can be reused. */
  confirmed: boolean;
  closedStatus?: string;
  /** What the last successful forward learnt (set with `confirmed`). */
  answer?: HeartbeatAnswer;
  /** The run's own lease, learnt with the answer. */
  leaseTimeoutMs?: number;
  /** The least lease end this process's forwards are known to have set (a forward lands before it), carried across windows. */
  leaseFloor?: number;
  /** A refusal to repeat until `until` (its Retry-After), without forwarding. */
  refused?: HeldRefusal;
  /** When this caller's heartbeats came, carried across windows. */
  cadence?: Cadence;
}

export class HeartbeatCoalescer {
  private readonly entries = new Map<string, Entry>();
  /** The newest attempt a forward learnt, per run (a key prefix), bounded like the entries. */
  private readonly attempts = boundedCache<number>({ max: 100_000 });
  private admitsSinceSweep = 0;

  constructor(
    /** Until a forward says otherwise: the window of a run started with the current settings. */
    readonly defaultWindowMs: number,
    /** Above this many remembered keys, stale ones are swept at once (memory stays bounded). */
    private readonly sweepAbove = 10_000,
    /** The cap on the window, as a fraction of a run's lease. */
    private readonly leaseFraction = 0.7,
  ) {}

  /** The member is part of the key: one member's answer is never another's. */
  static key({ organizationId, runId, attempt, memberId }: HeartbeatSender): string {
    return JSON.stringify([organizationId, runId, attempt, memberId]);
  }

  /** Decides, synchronously (so concurrent requests see each other), whether to forward. */
  admit(key: string, now: number): HeartbeatVerdict {
    this.maybeSweep(now);
    const entry = this.entries.get(key);
    const cadence = observeHeartbeat(entry?.cadence, now);
    if (entry) entry.cadence = cadence;
    if (entry?.refused && now < entry.refused.until) return { forward: false, refusal: entry.refused.error };
    if (entry && !entry.refused && now - entry.at < entry.windowMs) {
      if (!entry.confirmed) return { forward: false, pending: true };
      if (entry.closedStatus !== undefined) return { forward: false, closedStatus: entry.closedStatus };
      if (HeartbeatCoalescer.answerHolds(entry, now, cadence)) return { forward: false, ...entry.answer! };
    }
    const leaseFloor = entry?.leaseFloor;
    const windowMs = entry?.windowMs ?? this.defaultWindowMs;
    this.entries.set(key, { at: now, windowMs, confirmed: false, leaseFloor, cadence });
    return leaseFloor === undefined ? { forward: true } : { forward: true, leaseFloor };
  }

  /** An answer that holds no lease has nothing to lose; one that holds it must outlast the next heartbeat. */
  private static answerHolds(entry: Entry, now: number, cadence: Cadence): boolean {
    const answer = entry.answer!;
    if (!answer.leaseValid) return true;
    return mayAnswerFromMemory({ leaseExpiresAt: answer.leaseExpiresAt, leaseTimeoutMs: entry.leaseTimeoutMs ?? 0 }, now, cadence);
  }

  /** The forward was refused for a while (429 with Retry-After): the member's next heartbeats get the same until then. */
  markRefused(key: string, at: number, refused: HeldRefusal): void {
    const entry = this.entries.get(key);
    if (entry?.at !== at) return;
    const windowMs = Math.max(1, refused.until - at);
    this.entries.set(key, {
      at,
      windowMs,
      confirmed: true,
      refused: { error: refused.error, until: refused.until },
      cadence: entry.cadence,
    });
  }

  /**
   * The forward succeeded, and the run's lease is known: answer its heartbeats from memory while
   * that lease allows, for at most the capped fraction of it. Each run carries its own lease, so a
   * deploy that changes the default never shortens the window of a live run into a lost lease, nor
   * stretches it past one. The heartbeat moved the lease to at least `at + leaseTimeoutMs`.
   */
  forwarded(
    key: string,
    at: number,
    { leaseTimeoutMs, cancelRequested = false, lease = { attempt: HeartbeatCoalescer.attemptOf(key), leaseValid: true } }: ForwardAnswer,
  ): void {
    const entry = this.entries.get(key);
    if (entry?.at !== at) return;
    entry.windowMs = HeartbeatCoalescer.windowFor(leaseTimeoutMs, this.leaseFraction);
    entry.confirmed = true;
    entry.leaseTimeoutMs = leaseTimeoutMs;
    // A newer attempt another forward already learnt of holds the run, whatever this one was told.
    const newest = this.attempts.get(HeartbeatCoalescer.runPrefix(key));
    const held = newest !== undefined && newest > HeartbeatCoalescer.attemptOf(key) ? { attempt: newest, leaseValid: false } : lease;
    entry.answer = { leaseExpiresAt: at + leaseTimeoutMs, cancelRequested, ...held };
    if (held.leaseValid) entry.leaseFloor = Math.max(entry.leaseFloor ?? 0, at + leaseTimeoutMs);
    this.noteAttempt(key, lease.attempt);
  }

  /** This process took a cancel of the run: its coalesced heartbeats say so from now on. */
  noteCancelRequested(organizationId: string, runId: string): void {
    // Keys are JSON arrays that start with these two ids.
    const prefix = `${JSON.stringify([organizationId, runId]).slice(0, -1)},`;
    for (const [key, entry] of this.entries) {
      if (key.startsWith(prefix) && entry.answer) entry.answer = { ...entry.answer, cancelRequested: true };
    }
  }

  /**
   * A newer attempt holds the run: coalesced heartbeats of older attempts say so from now on. Only
   * a forward that learns of an attempt newer than any noted for its run looks through the
   * entries, so the usual forward costs no scan however many runs this process follows.
   */
  private noteAttempt(key: string, current: number): void {
    const prefix = HeartbeatCoalescer.runPrefix(key);
    if ((this.attempts.get(prefix) ?? 1) >= current) return;
    this.attempts.set(prefix, current);
    for (const [other, entry] of this.entries) {
      if (!other.startsWith(prefix) || !entry.answer || HeartbeatCoalescer.attemptOf(other) >= current) continue;
      entry.answer = { ...entry.answer, attempt: current, leaseValid: false };
    }
  }

  /** What every key of the key's run starts with (keys are JSON arrays of organization, run, attempt and member). */
  private static runPrefix(key: string): string {
    const [organizationId, runId] = JSON.parse(key) as [string, string];
    return `${JSON.stringify([organizationId, runId]).slice(0, -1)},`;
  }

  /** The attempt a key was made for (key). */
  static attemptOf(key: string): number {
    return Number((JSON.parse(key) as unknown[])[2]);
  }

  static windowFor(leaseTimeoutMs: number, leaseFraction = 0.7): number {
    return Math.max(1, Math.floor(leaseTimeoutMs * leaseFraction));
  }

  /** The forward failed: let the next heartbeat try again (what is known of the lease and the cadence stays). */
  release(key: string, at: number): void {
    const entry = this.entries.get(key);
    if (entry?.at !== at) return;
    this.entries.set(key, { ...entry, at: Number.NEGATIVE_INFINITY, confirmed: false, answer: undefined });
  }

  /** The run turned out to be closed: coalesced heartbeats get the same answer for the window. */
  markClosed(key: string, status: string, now: number): void {
    const windowMs = this.entries.get(key)?.windowMs ?? this.defaultWindowMs;
    this.entries.set(key, { at: now, windowMs, confirmed: true, closedStatus: status });
  }

  get size(): number {
    return this.entries.size;
  }

  private maybeSweep(now: number): void {
    this.admitsSinceSweep += 1;
    if (this.entries.size <= this.sweepAbove && this.admitsSinceSweep < 1_000) return;
    this.admitsSinceSweep = 0;
    // An entry outlives its window while the lease it knows of lasts: the next forward reads it.
    for (const [key, entry] of this.entries) {
      if (now - entry.at >= entry.windowMs && (entry.leaseFloor ?? 0) <= now) this.entries.delete(key);
    }
  }
}
