/**
 * Admission per organization at the front door, before a request reaches the engine:
 *
 * - **In flight, per API process**: at most ADMISSION_ORG_IN_FLIGHT engine calls of one
 *   organization at once. A flood then queues in its own organization's line instead of taking
 *   every connection to Temporal.
 * - **Accepted rate, across the cluster**: at most ADMISSION_ORG_RATE requests a second per
 *   organization, counted in Postgres per fixed window (ADMISSION_RATE_WINDOW) so N replicas allow
 *   the rate, not N times it. A replica takes ADMISSION_RATE_BATCH units per round trip and spends
 *   them locally, so the count costs Postgres one write per batch, not per request; units a
 *   replica took and did not spend lapse with their window (the error is on the strict side).
 *
 * - **Measured delay, per API process**: once the engine saturates (its measured delay,
 *   src/app/engine-delay.ts, past ADMISSION_DELAY_TARGET and rising), new work is limited to the
 *   engine's measured throughput, shared between the organizations that ask by weighted max-min
 *   fairness (src/app/delay-limiter.ts): only those asking beyond their weighted part of it are
 *   refused. The fixed rate above is then only a ceiling.
 *
 * What a request does when its organization is at a bound is its sender's business: `shed` waits
 * up to ADMISSION_QUEUE_WAIT for an in-flight slot, and otherwise (or when the rate is spent)
 * answers with a coded error carrying Retry-After (the routes give GitHub 503, runtimes 429);
 * `wait` waits for a slot and for the next window up to ADMISSION_WAIT_MAX, then goes through
 * anyway (an operator's forced GitHub sync, which nobody would retry); `bypass` is
 * never limited nor counted against the bound (heartbeats of a run that holds a lease: dropping
 * one could cost the run its lease; signed Slack events, which Slack bounds and cannot resend for
 * long; an admin's MCP resolve, rare and waited on).
 *
 * When Postgres cannot count, the request goes through unmetered: admission shares the engine
 * fairly, it is not what makes an ack durable, and refusing everything during a Postgres blip
 * would turn a partial outage into a total one.
 */
import { boundedCache } from './bounded-caches';
import { DelayLimiter, type DelayVerdict } from './delay-limiter';
import type { EngineDelay } from './engine-delay';
import { AppError, errors } from './errors';
import type { Logger } from './log';
import type { Metrics } from './metrics';
import type { Db } from './store/db';
import { WindowCounter, windowStart } from './store/window-counter';
import { tenantClass, type TenantClass } from './temporal/fairness';

export type AdmissionMode = 'shed' | 'wait' | 'bypass';

export interface AdmissionSettings {
  enabled: boolean;
  inFlight: number;
  ratePerSecond: number;
  windowMs: number;
  batch: number;
  waitMaxMs: number;
  /** How long a request that would be shed waits for an in-flight slot first (a burst queues briefly). */
  queueWaitMs: number;
  /** ADMISSION_DELAY_TARGET: the engine delay past which, rising, the engine is saturated and new work limited. */
  delayTargetMs: number;
}

export interface Ticket {
  /** Gives the in-flight slot back; call once the engine answered. */
  release(): void;
}

/** What the ingress gateway (src/app/ingress.ts) asks of admission before every start. */
export interface AdmissionGate {
  /** Admits one engine call of `tenant`, or throws the coded shed error in `shed` mode. */
  admit(tenant: string, mode: AdmissionMode): Promise<Ticket>;
  /** Throws the shed error, without any I/O, when `tenant`'s share of the moment is known spent. */
  shedIfSpent(tenant: string): void;
}

declare module './store/schema' {
  interface Database {
    /** Accepted requests per organization and fixed window, for every replica (migration 0009_fairness_admission). */
    admission_windows: { key: string; window_start: Date | string; used: number };
  }
}

type Result = 'admitted' | 'bypassed' | 'shed_in_flight' | 'shed_rate' | 'shed_delay' | 'waited' | 'overdue' | 'unmetered';

const NOOP: Ticket = { release: () => undefined };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Units an organization may take per window: the per-second rate over the window, at least one. */
export function unitsPerWindow(settings: Pick<AdmissionSettings, 'ratePerSecond' | 'windowMs'>, weight = 1): number {
  return Math.max(1, Math.ceil((settings.ratePerSecond * settings.windowMs * weight) / 1000));
}

/** Whole seconds until the window after `now` opens, at least 1: the Retry-After of a shed request. */
export function retryAfterSeconds(now: number, windowMs: number): number {
  return Math.max(1, Math.ceil((windowStart(now, windowMs) + windowMs - now) / 1000));
}

/** What one organization may take: its units per window, and its weight's class for metrics. */
interface Share {
  tenantClass: TenantClass;
  units: number;
}

/** One request waiting its turn: whose it is, how a refusal is answered, and until when it may wait. */
interface Asking {
  tenant: string;
  mode: AdmissionMode;
  /** The clock time (ms) past which the request is let through late (`overdue`) rather than waiting on. */
  deadline: number;
}

interface Line {
  active: number;
  waiters: (() => void)[];
}

interface Budget {
  window: number;
  remaining: number;
  /** Postgres refused this window's next unit: every replica has spent it, so asking again would only cost a write. */
  spent?: boolean;
  /** The tenant's share when the budget was taken (its class for the metrics of an early shed). */
  share: Share;
  /** One Postgres take at a time per organization and process; others wait for its result. */
  taking?: Promise<void>;
}

export interface AdmissionDeps {
  db: Db;
  log: Logger;
  metrics: Metrics;
  settings: AdmissionSettings;
  /** The tenant's weight (default 1): its rate is ADMISSION_ORG_RATE × weight, its metrics class follows from it. */
  weightOf: (tenant: string) => Promise<number>;
  /** The engine's delay as the workers published it (src/app/engine-delay.ts); without it, no limit by delay. */
  engineDelay?: { intervalMs: number; current(): EngineDelay; refresh(): Promise<EngineDelay | undefined> };
  now?: () => number;
}

/** Admission as the API runs it: per organization, in flight per process and at a rate across replicas. */
export class AdmissionControl implements AdmissionGate {
  private readonly lines = new Map<string, Line>();
  /** Each organization's local budget; the least recently used dropped past 10,000. */
  private readonly budgets = boundedCache<Budget>({ max: 10_000 });
  private readonly now: () => number;
  /** Accepted units per organization and window, shared by every replica (`admission_windows`). */
  private readonly counter: WindowCounter;
  private readonly limiter: DelayLimiter | undefined;
  /** The last engine delay reading the limiter moved on. */
  private readingAt = 0;

  constructor(private readonly deps: AdmissionDeps) {
    this.now = deps.now ?? (() => Date.now());
    this.counter = new WindowCounter({ db: deps.db, log: deps.log, table: 'admission_windows', windowMs: deps.settings.windowMs });
    const delay = deps.engineDelay;
    this.limiter = delay ? new DelayLimiter({ targetMs: deps.settings.delayTargetMs, intervalMs: delay.intervalMs }) : undefined;
  }

  /** Asks for a fresh delay reading once an interval has passed; the limiter moves when it comes. Never waits. */
  private followDelay(): void {
    const delay = this.deps.engineDelay;
    if (!delay || !this.limiter) return;
    void delay.refresh().then((reading) => {
      if (!reading || reading.readAt <= this.readingAt) return;
      this.readingAt = reading.readAt;
      this.limiter!.update(reading.delayMs, reading.readAt);
      this.deps.metrics.engineDelay.set(reading.delayMs === undefined ? -1 : reading.delayMs / 1000);
      this.deps.metrics.admissionLimit.set(this.limiter!.currentLimit ?? 0);
    });
  }

  /** New work of `tenant` by measured delay: one request taken, or the refusal to answer. */
  private byDelay(tenant: string, weight: number, take: boolean): DelayVerdict {
    if (!this.limiter) return { ok: true };
    this.followDelay();
    const now = this.now();
    return take ? this.limiter.take(tenant, weight, now) : this.limiter.check(tenant, weight, now);
  }

  /** Admits one engine call of `tenant`, or throws the coded shed error in `shed` mode. */
  async admit(tenant: string, mode: AdmissionMode): Promise<Ticket> {
    if (!this.deps.settings.enabled) return NOOP;
    const weight = await this.deps.weightOf(tenant);
    const share: Share = { tenantClass: tenantClass(weight), units: unitsPerWindow(this.deps.settings, weight) };
    const count = (result: Result) => this.deps.metrics.admission.inc({ class: share.tenantClass, mode, result });
    if (mode === 'bypass') {
      count('bypassed');
      return NOOP;
    }
    const deadline = this.now() + this.deps.settings.waitMaxMs;
    const asking: Asking = { tenant, mode, deadline };
    const delay = await this.waitByDelay(asking, weight);
    if (typeof delay === 'number') {
      count('shed_delay');
      throw errors.shed(delay);
    }
    const rate = await this.takeRate(asking, share);
    if (rate === 'shed') {
      count('shed_rate');
      throw errors.shed(retryAfterSeconds(this.now(), this.deps.settings.windowMs));
    }
    const slotDeadline = mode === 'shed' ? this.now() + this.deps.settings.queueWaitMs : deadline;
    const slot = await this.takeSlot(tenant, mode, slotDeadline);
    if (slot === 'shed') {
      count('shed_in_flight');
      throw errors.shed(1);
    }
    count(admittedResult([delay, rate, slot]));
    return this.ticket(tenant, share.tenantClass);
  }

  /** The in-flight slot held until the engine answered. */
  private ticket(tenant: string, tenantClass: TenantClass): Ticket {
    const gauge = this.deps.metrics.admissionInFlight.labels({ class: tenantClass });
    gauge.inc();
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        gauge.dec();
        this.releaseSlot(tenant);
      },
    };
  }

  /**
   * Shed mode is refused at once (the Retry-After, in seconds, is returned); wait mode waits for
   * the organization's next request by delay, up to its deadline.
   */
  private async waitByDelay({ tenant, mode, deadline }: Asking, weight: number): Promise<'ok' | 'waited' | 'overdue' | number> {
    for (let waited = false; ; waited = true) {
      const verdict = this.byDelay(tenant, weight, true);
      if (verdict.ok) return waited ? 'waited' : 'ok';
      if (mode === 'shed') return verdict.retryAfterSeconds;
      const wake = Math.min(deadline, this.now() + verdict.retryAfterSeconds * 1000);
      if (wake >= deadline) return 'overdue';
      await sleep(wake - this.now());
    }
  }

  /**
   * Throws the shed error, without any I/O, when this process already knows that `tenant`'s share
   * of the current window is spent. A route calls it before its own Postgres work, so a flood
   * that would be shed costs a lookup in memory, not a write per request.
   */
  shedIfSpent(tenant: string): void {
    if (!this.deps.settings.enabled) return;
    const weight = this.limiter?.weightOf(tenant) ?? 1;
    const delay = this.byDelay(tenant, weight, false);
    if (!delay.ok) {
      this.deps.metrics.admission.inc({ class: tenantClass(weight), mode: 'shed', result: 'shed_delay' });
      throw errors.shed(delay.retryAfterSeconds);
    }
    const now = this.now();
    const budget = this.budgets.get(tenant);
    if (budget?.window !== windowStart(now, this.deps.settings.windowMs) || !budget.spent) return;
    this.deps.metrics.admission.inc({ class: budget.share.tenantClass, mode: 'shed', result: 'shed_rate' });
    throw errors.shed(retryAfterSeconds(now, this.deps.settings.windowMs));
  }

  private async takeSlot(tenant: string, mode: AdmissionMode, deadline: number): Promise<'ok' | 'waited' | 'overdue' | 'shed'> {
    const line = this.lines.get(tenant) ?? { active: 0, waiters: [] };
    this.lines.set(tenant, line);
    if (line.active < this.deps.settings.inFlight) {
      line.active++;
      return 'ok';
    }
    // Waits its turn; a slot handed over by releaseSlot keeps `active` as it is.
    const handed = await new Promise<boolean>((resolve) => {
      const waiter = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(
        () => {
          line.waiters.splice(line.waiters.indexOf(waiter), 1);
          resolve(false);
        },
        Math.max(0, deadline - this.now()),
      );
      line.waiters.push(waiter);
    });
    if (handed) return 'waited';
    if (mode === 'shed') return 'shed';
    line.active++;
    return 'overdue';
  }

  private releaseSlot(tenant: string): void {
    const line = this.lines.get(tenant);
    if (!line) return;
    const next = line.waiters.shift();
    if (next) return next();
    line.active--;
    if (line.active <= 0 && line.waiters.length === 0) this.lines.delete(tenant);
  }

  /** One unit of the tenant's rate: spent from this process's batch, or a new batch from Postgres. */
  private async takeRate({ tenant, mode, deadline }: Asking, share: Share): Promise<'ok' | 'waited' | 'overdue' | 'shed' | 'unmetered'> {
    let waited = false;
    for (;;) {
      const now = this.now();
      const window = windowStart(now, this.deps.settings.windowMs);
      const budget = this.budgets.get(tenant);
      if (budget && budget.window === window && budget.remaining > 0) {
        budget.remaining--;
        return waited ? 'waited' : 'ok';
      }
      if (budget?.taking) {
        await budget.taking;
        continue;
      }
      const spent = budget?.window === window && budget.spent;
      const taken = spent ? false : await this.refill(tenant, share, window);
      if (taken === 'unmetered') return 'unmetered';
      if (taken) continue;
      if (mode === 'shed') return 'shed';
      const next = window + this.deps.settings.windowMs;
      if (next > deadline) return 'overdue';
      waited = true;
      await sleep(next - now);
    }
  }

  /** Takes a batch (or, near the limit, one unit) of this window from Postgres into the local budget. */
  private async refill(tenant: string, share: Share, window: number): Promise<boolean | 'unmetered'> {
    const budget: Budget = { window, remaining: 0, share };
    this.budgets.set(tenant, budget);
    let result: boolean | 'unmetered' = false;
    budget.taking = (async () => {
      try {
        const batch = Math.min(this.deps.settings.batch, share.units);
        const take = (units: number) => this.counter.take({ key: `org:${tenant}`, window, units, limit: share.units });
        const granted = (await take(batch)) ? batch : batch > 1 && (await take(1)) ? 1 : 0;
        budget.remaining = granted;
        budget.spent = granted === 0;
        result = granted > 0;
      } catch (error) {
        this.deps.log.warn({ err: error }, 'admission count not taken (postgres); admitting unmetered');
        result = 'unmetered';
      } finally {
        budget.taking = undefined;
      }
    })();
    await budget.taking;
    void this.counter.sweepSometimes(window);
    return result;
  }
}

/** What an admitted request's metric says: unmetered, or let through late, or after a wait, or at once. */
function admittedResult(steps: readonly string[]): Result {
  if (steps.includes('unmetered')) return 'unmetered';
  if (steps.includes('overdue')) return 'overdue';
  if (steps.includes('waited')) return 'waited';
  return 'admitted';
}

/** Whether an error is admission's refusal (the routes reshape it for their senders). */
function isShed(error: unknown): error is AppError {
  return error instanceof AppError && error.code === 'shed';
}

/**
 * A webhook's answer to admission's refusal: 503 `overloaded` with its Retry-After and this
 * `{ok:false, …}` body, which Slack and GitHub treat as a failed delivery to send again (a 429
 * Slack would count as a failure). Without it, the refusal is the API's 429, which clients wait out.
 */
export interface ShedAnswer {
  webhook: Record<string, unknown>;
}

/** Admission's refusal in the sender's shape (ShedAnswer); any other error as it is. */
export function reshapeShed(error: unknown, answer: ShedAnswer | undefined): unknown {
  if (!answer || !isShed(error)) return error;
  return errors.webhook('overloaded', 503, { fields: answer.webhook, headers: { 'retry-after': error.headers['retry-after'] ?? '1' } });
}

/**
 * Admission for the worker's activities and `den`: everything is admitted, unmetered. Work they
 * hand over was admitted at the front door already, or comes from an operator.
 */
export const admitAll: AdmissionGate = {
  admit: async () => NOOP,
  shedIfSpent: () => undefined,
};
