/**
 * How far behind the engine is, measured where it can be seen and shared through Postgres.
 *
 * - **Backlog age**: Temporal's DescribeTaskQueue reports, per task queue, how old the oldest task
 *   waiting for a worker is (sticky queues excluded: that is where a cached workflow's next task
 *   goes, so a signal to a live run never shows there).
 * - **Lag**: the run workflow reports, through a sink, how long each heartbeat and event took
 *   from its receipt at the front door to its application in the run (the workflow task's clock
 *   minus the report's `receivedAt`). That covers the sticky queues and the worker's own slots.
 *
 * Each worker process publishes both, per task queue it polls, about once a second
 * (ENGINE_DELAY_INTERVAL) in `engine_delays`; each API process reads the worst fresh row of its
 * own queues, at most once an interval, and admits new work by it (src/app/admission.ts).
 */
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Connection } from '@temporalio/client';
import type { InjectedSinks } from '@temporalio/worker';
import type { EngineDelaySinks } from './temporal/contract';
import type { Logger } from './log';
import type { Db } from './store/db';

declare module './store/schema' {
  interface Database {
    /** What each worker process measured per task queue (migration 0015_engine_capacity). */
    engine_delays: {
      task_queue: string;
      worker_id: string;
      backlog_age_ms: number;
      backlog_count: string | number;
      lag_ms: number;
      lag_samples: number;
      published_at: Date | string;
    };
  }
}

/** Samples of lag kept per queue and period: beyond it, reservoir sampling keeps a fair subset. */
const MAX_SAMPLES = 2_000;
/** The lag a period publishes: this percentile of its samples (one slow task is not a trend). */
const LAG_PERCENTILE = 0.9;

/** The `p` quantile of `values` (0 for none), by the nearest rank. */
export function quantile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

/** The lag samples the workflows reported in this worker process, per task queue, since the last take. */
export class LagRecorder {
  private periods = new Map<string, { samples: number[]; seen: number }>();

  observe(taskQueue: string, lagMs: number): void {
    if (!Number.isFinite(lagMs)) return;
    const period = this.periods.get(taskQueue) ?? { samples: [], seen: 0 };
    this.periods.set(taskQueue, period);
    period.seen += 1;
    const value = Math.max(0, lagMs);
    if (period.samples.length < MAX_SAMPLES) period.samples.push(value);
    else {
      const slot = Math.floor(Math.random() * period.seen);
      if (slot < MAX_SAMPLES) period.samples[slot] = value;
    }
  }

  /** This period's lag of `taskQueue` (its 90th percentile) and how many reports it saw; a new period starts. */
  take(taskQueue: string): { lagMs: number; samples: number } {
    const period = this.periods.get(taskQueue);
    this.periods.delete(taskQueue);
    return { lagMs: Math.round(quantile(period?.samples ?? [], LAG_PERCENTILE)), samples: period?.seen ?? 0 };
  }
}

/** The worker's side of the workflows' lag sink: each report's lag, under the task queue of the workflow that applied it. */
export function lagSinks(recorder: LagRecorder): InjectedSinks<EngineDelaySinks> {
  return { engineDelay: { lag: { fn: (info, ms) => recorder.observe(info.taskQueue, ms), callDuringReplay: false } } };
}

/** What DescribeTaskQueue says of a queue's backlog, workflow and activity tasks together. */
interface Backlog {
  ageMs: number;
  count: number;
}

const durationMs = (d: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
  d ? Number(d.seconds ?? 0) * 1000 + Math.floor((d.nanos ?? 0) / 1e6) : 0;

/** The normal queue's backlog (task queue kind 1), for workflow tasks (type 1) and activity tasks (type 2). */
async function describeBacklog(
  { connection, namespace }: Pick<PublisherDeps, 'connection' | 'namespace'>,
  taskQueue: string,
  timeoutMs: number,
): Promise<Backlog> {
  const backlog: Backlog = { ageMs: 0, count: 0 };
  for (const taskQueueType of [1, 2]) {
    const answer = await connection.withDeadline(Date.now() + timeoutMs, () =>
      connection.workflowService.describeTaskQueue({
        namespace,
        taskQueue: { name: taskQueue, kind: 1 },
        taskQueueType,
        reportStats: true,
      }),
    );
    backlog.ageMs = Math.max(backlog.ageMs, durationMs(answer.stats?.approximateBacklogAge));
    backlog.count += Number(answer.stats?.approximateBacklogCount ?? 0);
  }
  return backlog;
}

export interface PublisherDeps {
  db: Db;
  connection: Connection;
  namespace: string;
  /** Every queue this worker process polls. */
  taskQueues: string[];
  recorder: LagRecorder;
  intervalMs: number;
  log: Logger;
}

/** Rows older than this are deleted (a worker that stopped for good); readers ignore them much sooner. */
const ROW_RETENTION_MS = 3_600_000;

/**
 * Publishes this worker's measurements every interval until stopped; a failed round is skipped,
 * not retried, and so is a round due while the last is still running (a slow Temporal answers
 * each describe in up to an interval, so rounds would otherwise queue without end).
 */
export function startEngineDelayPublisher(deps: PublisherDeps): { stop(): Promise<void> } {
  const workerId = `${os.hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
  let rounds = 0;
  let current: Promise<void> | undefined;
  const publish = async () => {
    for (const taskQueue of deps.taskQueues) {
      let backlog: Backlog;
      try {
        backlog = await describeBacklog(deps, taskQueue, deps.intervalMs);
      } catch (error) {
        // Temporal did not answer: nothing fresh to say, and the row goes stale, which readers see.
        deps.log.debug({ err: error, taskQueue }, 'task queue not described; delay not published');
        continue;
      }
      const lag = deps.recorder.take(taskQueue);
      const row = {
        task_queue: taskQueue,
        worker_id: workerId,
        backlog_age_ms: Math.min(backlog.ageMs, 2 ** 31 - 1),
        backlog_count: backlog.count,
        lag_ms: Math.min(lag.lagMs, 2 ** 31 - 1),
        lag_samples: lag.samples,
        published_at: new Date(),
      };
      await deps.db
        .insertInto('engine_delays')
        .values(row)
        .onConflict((oc) => oc.columns(['task_queue', 'worker_id']).doUpdateSet(row))
        .execute();
    }
    if (++rounds % 600 === 0) {
      await sql`DELETE FROM engine_delays WHERE published_at < ${new Date(Date.now() - ROW_RETENTION_MS)}`.execute(deps.db);
    }
  };
  const timer = setInterval(() => {
    current ??= publish()
      .catch((error: unknown) => deps.log.warn({ err: error }, 'engine delay not published'))
      .finally(() => (current = undefined));
  }, deps.intervalMs);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await current;
      await deps.db
        .deleteFrom('engine_delays')
        .where('worker_id', '=', workerId)
        .execute()
        .catch(() => undefined);
    },
  };
}

/** What the API knows of the engine's delay: the worst of the fresh rows of its queues, and when it read them. */
export interface EngineDelay {
  /** The worst backlog age or lag of any fresh row, in ms; undefined when no worker published lately. */
  delayMs: number | undefined;
  readAt: number;
}

export interface DelayReaderOptions {
  db: Db;
  /** The queues this deployment's workers poll (its main queue and the features' own). */
  taskQueues: string[];
  intervalMs: number;
  log: Logger;
  now?: () => number;
}

/** Rows older than this many intervals are a worker that stopped publishing: not counted. */
const STALE_INTERVALS = 5;

/**
 * The engine's delay as this API process last read it. `refresh()` reads Postgres at most once
 * an interval (one read at a time); callers use the value in hand and never wait for a read.
 */
export function createDelayReader(options: DelayReaderOptions): { current(): EngineDelay; refresh(): Promise<EngineDelay | undefined> } {
  const now = options.now ?? (() => Date.now());
  let known: EngineDelay = { delayMs: undefined, readAt: 0 };
  let reading: Promise<EngineDelay | undefined> | undefined;
  const read = async (): Promise<EngineDelay> => {
    const since = new Date(now() - STALE_INTERVALS * options.intervalMs);
    const row = await options.db
      .selectFrom('engine_delays')
      .select((eb) => eb.fn.max(sql<number>`greatest(backlog_age_ms, lag_ms)`).as('delay'))
      .where('task_queue', 'in', options.taskQueues)
      .where('published_at', '>', since)
      .executeTakeFirst();
    const delay = row?.delay;
    return { delayMs: delay === null || delay === undefined ? undefined : Number(delay), readAt: now() };
  };
  return {
    current: () => known,
    /** A new reading once an interval has passed since the last one, else undefined. */
    refresh: () => {
      if (reading || now() - known.readAt < options.intervalMs) return Promise.resolve(undefined);
      reading = read()
        .then((value) => (known = value))
        .catch((error: unknown) => {
          // Postgres cannot answer: admission keeps its limits as they are until it can.
          options.log.warn({ err: error }, 'engine delay not read');
          known = { ...known, readAt: now() };
          return undefined;
        })
        .finally(() => (reading = undefined));
      return reading;
    },
  };
}
