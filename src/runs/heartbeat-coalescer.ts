/**
 * Heartbeat coalescing: a process forwards a heartbeat of (run, attempt, member) to Temporal
 * at most once per window (a fraction of the run's own lease, RUN_HEARTBEAT_COALESCE_FRACTION,
 * 0.7 by default), so Temporal load grows with the number of runs, not with the number of
 * heartbeats. Runners heartbeat about every 10 s against a 60 s lease: a 42 s window forwards one
 * heartbeat in five, 10 s before the lease would run out.
 *
 * The others are answered at once once a forward for the same member succeeded, which is when
 * the API checked that the member may reach the run; while that forward is in flight they are
 * `pending` and share its answer. If a forward fails, `release` forgets it, so the next one is
 * forwarded.
 *
 * A coalesced answer is what this process last learnt of the run: the lease its last forward set,
 * and whether a cancel was requested (read with that forward, or told by this process's cancel
 * route). Entries live one window, so another process's cancel is learnt within one window.
 *
 * Two more things it remembers for the forward path: the least lease its forwards are known to
 * have set (`leaseFloor`, kept past the window, so the next forward knows how long it may take
 * before that lease runs out), and a refusal for the time its Retry-After names (a run refused
 * its start, beyond capacity or past its organization's share, asks again without costing a
 * Postgres read or a Temporal call).
 * Pure and clock-injected: it knows nothing of HTTP or Temporal.
 */
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

interface Entry {
  at: number;
  /** The run's own window (a fraction of its lease), learned when a heartbeat is forwarded. */
  windowMs: number;
  /** A forward of this key succeeded: the caller may reach the run, so its answer can be reused. */
  confirmed: boolean;
  closedStatus?: string;
  /** What the last successful forward learnt (set with `confirmed`). */
  answer?: HeartbeatAnswer;
  /** The least lease end this process's forwards are known to have set (a forward lands before it), carried across windows. */
  leaseFloor?: number;
  /** A refusal to repeat until `until` (its Retry-After), without forwarding. */
  refused?: { error: unknown; until: number };
}

export class HeartbeatCoalescer {
  private readonly entries = new Map<string, Entry>();
  private admitsSinceSweep = 0;

  constructor(
    /** Until a forward says otherwise: the window of a run started with the current settings. */
    readonly defaultWindowMs: number,
    /** Above this many remembered keys, stale ones are swept at once (memory stays bounded). */
    private readonly sweepAbove = 10_000,
    /** The window as a fraction of a run's lease. */
    private readonly leaseFraction = 0.7,
  ) {}

  /** The member is part of the key: one member's answer is never another's. */
  static key(organizationId: string, runId: string, attempt: number, memberId: string): string {
    return JSON.stringify([organizationId, runId, attempt, memberId]);
  }

  /** Decides, synchronously (so concurrent requests see each other), whether to forward. */
  admit(key: string, now: number): HeartbeatVerdict {
    this.maybeSweep(now);
    const entry = this.entries.get(key);
    if (entry?.refused && now < entry.refused.until) return { forward: false, refusal: entry.refused.error };
    if (entry && !entry.refused && now - entry.at < entry.windowMs) {
      if (!entry.confirmed) return { forward: false, pending: true };
      if (entry.closedStatus !== undefined) return { forward: false, closedStatus: entry.closedStatus };
      return { forward: false, ...entry.answer! };
    }
    const leaseFloor = entry?.leaseFloor;
    this.entries.set(key, { at: now, windowMs: entry?.windowMs ?? this.defaultWindowMs, confirmed: false, leaseFloor });
    return leaseFloor === undefined ? { forward: true } : { forward: true, leaseFloor };
  }

  /** The forward was refused for a while (429 with Retry-After): the member's next heartbeats get the same until then. */
  markRefused(key: string, at: number, error: unknown, untilMs: number): void {
    const entry = this.entries.get(key);
    if (entry?.at !== at) return;
    this.entries.set(key, { at, windowMs: Math.max(1, untilMs - at), confirmed: true, refused: { error, until: untilMs } });
  }

  /**
   * The forward succeeded, and the run's lease is known: coalesce its heartbeats for the fraction
   * of it. Each run carries its own lease, so a deploy that changes the default never shortens
   * the window of a live run into a lost lease, nor stretches it past one. The heartbeat moved
   * the lease to at least `at + leaseTimeoutMs`.
   */
  forwarded(
    key: string,
    at: number,
    leaseTimeoutMs: number,
    cancelRequested = false,
    lease: { attempt: number; leaseValid: boolean } = { attempt: HeartbeatCoalescer.attemptOf(key), leaseValid: true },
  ): void {
    const entry = this.entries.get(key);
    if (entry?.at !== at) return;
    entry.windowMs = HeartbeatCoalescer.windowFor(leaseTimeoutMs, this.leaseFraction);
    entry.confirmed = true;
    entry.answer = { leaseExpiresAt: at + leaseTimeoutMs, cancelRequested, ...lease };
    if (lease.leaseValid) entry.leaseFloor = Math.max(entry.leaseFloor ?? 0, at + leaseTimeoutMs);
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

  /** A newer attempt holds the run: coalesced heartbeats of older attempts say so from now on. */
  private noteAttempt(key: string, current: number): void {
    const [organizationId, runId] = JSON.parse(key) as [string, string];
    const prefix = `${JSON.stringify([organizationId, runId]).slice(0, -1)},`;
    for (const [other, entry] of this.entries) {
      if (!other.startsWith(prefix) || !entry.answer || HeartbeatCoalescer.attemptOf(other) >= current) continue;
      entry.answer = { ...entry.answer, attempt: current, leaseValid: false };
    }
  }

  /** The attempt a key was made for (key). */
  static attemptOf(key: string): number {
    return Number((JSON.parse(key) as unknown[])[2]);
  }

  static windowFor(leaseTimeoutMs: number, leaseFraction = 0.7): number {
    return Math.max(1, Math.floor(leaseTimeoutMs * leaseFraction));
  }

  /** The forward failed: let the next heartbeat try again (what is known of the lease stays). */
  release(key: string, at: number): void {
    const entry = this.entries.get(key);
    if (entry?.at !== at) return;
    if (entry.leaseFloor === undefined) this.entries.delete(key);
    else this.entries.set(key, { at: 0, windowMs: 0, confirmed: false, leaseFloor: entry.leaseFloor });
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
