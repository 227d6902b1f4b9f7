/**
 * Live-run capacity: how many runs may hold a lease at once (RUN_CAPACITY), admitted where a run
 * becomes live. A claim, or a report that would start a run or a newer attempt, beyond it is
 * refused with 429 `capacity` and Retry-After, before anything reaches Temporal; a run that holds
 * its lease is never refused (its heartbeats and events do not pass here). A queued run (a Slack
 * invocation's) stays queued until a claim finds room.
 *
 * The count is the `automation_runs` rows that say `running`, read at most once a second per API
 * process, plus the runs this process admitted whose rows do not say so yet. Each replica counts
 * the others' admissions once their rows show them, so N replicas can overshoot by what the
 * others admit within about a second: the bound is approximate across replicas, exact within one.
 * When Postgres cannot count, the last count stands (none yet: only this process's admissions
 * count), as admission's rate goes unmetered: a Postgres outage must not stop runs from starting.
 */
import { sql } from 'kysely';
import { errors } from '../app/errors';
import type { Logger } from '../app/log';
import type { Metrics } from '../app/metrics';
import type { Db } from '../app/store/db';
import { outlivedMs } from './reconcile';
import type { RunsSettings } from './settings';
import type { RunKey } from './store';

/** How often a process reads the live count from Postgres, at most. */
const COUNT_EVERY_MS = 1_000;
/** A run admitted here whose row never showed it (its start failed) stops counting after this. */
const PENDING_MAX_MS = 30_000;
/** What a refused claim or report is told to wait: runs end over minutes, not milliseconds. */
const CAPACITY_RETRY_AFTER_SECONDS = 10;

export type CapacityVia = 'claim' | 'report';

export interface CapacityDeps {
  db: Db;
  settings: RunsSettings;
  metrics: Metrics;
  log: Logger;
  now: () => number;
}

/** The key of a run in this module: organization and run id. */
const runKey = (organizationId: string, runId: string) => `${organizationId}\u0000${runId}`;

/** Whether `live` runs leave room for one more under `limit` (0: no limit). */
export function hasRoom(live: number, limit: number): boolean {
  return limit === 0 || live < limit;
}

export class RunCapacity {
  private counted = { live: 0, at: Number.NEGATIVE_INFINITY };
  private counting: Promise<void> | undefined;
  /** Runs this process admitted whose rows did not say `running` at the last count, by key: when admitted. */
  private readonly pending = new Map<string, { organizationId: string; runId: string; at: number }>();

  constructor(private readonly deps: CapacityDeps) {}

  get limit(): number {
    return this.deps.settings.capacity.liveRuns;
  }

  /**
   * Admits one run becoming live, or throws 429 `capacity`. `exists` is asked only at the limit,
   * before refusing: a run another process started a moment ago (no row yet) is already live.
   */
  async admit(run: RunKey, via: CapacityVia, exists?: () => Promise<boolean>): Promise<void> {
    const { organizationId, runId } = run;
    if (this.limit === 0) return;
    const key = runKey(organizationId, runId);
    if (this.pending.has(key)) return;
    await this.fresh();
    if (!hasRoom(this.live(), this.limit) && !(await exists?.())) {
      this.deps.metrics.runCapacity.inc({ via, result: 'refused' });
      throw errors.capacity(CAPACITY_RETRY_AFTER_SECONDS);
    }
    this.pending.set(key, { organizationId, runId, at: this.deps.now() });
    this.deps.metrics.runCapacity.inc({ via, result: 'admitted' });
    this.deps.metrics.liveRuns.set(this.live());
  }

  /** A run admitted here did not start after all (its start failed): its place is given back. */
  release({ organizationId, runId }: RunKey): void {
    this.pending.delete(runKey(organizationId, runId));
  }

  private live(): number {
    return this.counted.live + this.pending.size;
  }

  /** The count, once a second at most; concurrent callers share one read. */
  private async fresh(): Promise<void> {
    if (this.deps.now() - this.counted.at < COUNT_EVERY_MS) return;
    this.counting ??= this.count()
      .catch((error: unknown) => {
        this.deps.log.warn({ err: error }, 'live runs not counted (postgres); the last count stands');
        this.counted = { live: Number.isFinite(this.counted.at) ? this.counted.live : 0, at: this.deps.now() };
      })
      .finally(() => (this.counting = undefined));
    await this.counting;
  }

  private async count(): Promise<void> {
    const now = this.deps.now();
    const since = new Date(now - outlivedMs(this.deps.settings.defaults));
    // Settled first: a run whose row turns running between the two reads is counted twice (the
    // strict side), never missed.
    await this.settlePending(now);
    const row = await sql<{ n: string }>`
      SELECT count(*) AS n FROM automation_runs WHERE status = 'running' AND created_at > ${since}`.execute(this.deps.db);
    this.counted = { live: Number(row.rows[0]?.n ?? 0), at: now };
    this.deps.metrics.liveRuns.set(this.live());
  }

  /** Drops the admitted runs whose rows now say running (counted) or closed (not live), and the expired. */
  private async settlePending(now: number): Promise<void> {
    for (const [key, run] of this.pending) if (now - run.at > PENDING_MAX_MS) this.pending.delete(key);
    if (this.pending.size === 0) return;
    const runs = [...this.pending.values()];
    const rows = await sql<{ organization_id: string; run_id: string; status: string }>`
      SELECT organization_id, run_id, status FROM automation_runs
      WHERE (organization_id, run_id) IN (
        SELECT * FROM unnest(${runs.map((r) => r.organizationId)}::text[], ${runs.map((r) => r.runId)}::text[]))`.execute(this.deps.db);
    for (const row of rows.rows) {
      if (row.status !== 'queued' && row.status !== 'awaiting_retry') this.pending.delete(runKey(row.organization_id, row.run_id));
    }
  }
}
