/**
 * The Temporal worker: runs the workflows and activities the composition root hands it
 * (src/main/worker.ts reads them from the feature descriptors) on the main task queue and on
 * any extra queue a feature asks for. Scale it out by running more `npm run worker` processes.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import {
  type InjectedSinks,
  type LogLevel,
  type LogMetadata,
  NativeConnection,
  Runtime,
  Worker,
  bundleWorkflowCode,
} from '@temporalio/worker';
import type { PlatformConfig } from '../config';
import type { ActivityFunction } from '../feature';
import type { Logger } from '../log';
import type { EngineDelaySinks } from './contract';

/**
 * Bundles the workflow modules once (tests do it in the global setup; production at build time).
 * The bundle's entry re-exports each module, so the list of workflow types is the descriptors'.
 */
export async function bundleWorkflows(modules: readonly string[]): Promise<string> {
  // The entry must sit where the SDK's own workflow modules resolve from: under node_modules.
  const nodeModules = path.resolve(require.resolve('@temporalio/workflow/package.json'), '..', '..', '..');
  await fs.mkdir(path.join(nodeModules, '.cache'), { recursive: true });
  const dir = await fs.mkdtemp(path.join(nodeModules, '.cache', 'den-workflows-'));
  const entry = path.join(dir, 'index.js');
  try {
    await fs.writeFile(entry, modules.map((module) => `export * from ${JSON.stringify(module)};\n`).join(''));
    const { code } = await bundleWorkflowCode({ workflowsPath: entry, logger: quietBundlerLogger });
    return code;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

const noop = () => undefined;
const quietBundlerLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };

let runtimeInstalled = false;

const PINO_LEVEL: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The SDK runtime is process-wide: install it once, logging through pino (the SDK's default
 * writes to the console) and with Prometheus metrics when WORKER_METRICS_PORT is set.
 */
function installWorkerRuntime(config: PlatformConfig, log: Logger): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const sdkLog = log.child({ component: 'temporal-sdk' });
  Runtime.install({
    logger: {
      log: (level: LogLevel, message: string, meta?: LogMetadata) => sdkLog[PINO_LEVEL[level]](meta ?? {}, message),
      trace: (message: string, meta?: LogMetadata) => sdkLog.trace(meta ?? {}, message),
      debug: (message: string, meta?: LogMetadata) => sdkLog.debug(meta ?? {}, message),
      info: (message: string, meta?: LogMetadata) => sdkLog.info(meta ?? {}, message),
      warn: (message: string, meta?: LogMetadata) => sdkLog.warn(meta ?? {}, message),
      error: (message: string, meta?: LogMetadata) => sdkLog.error(meta ?? {}, message),
    },
    telemetryOptions: {
      // The SDK core's own (Rust) logs go through the same logger instead of raw stderr.
      logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} },
      ...(config.temporal.workerMetricsPort > 0
        ? { metrics: { prometheus: { bindAddress: `${config.http.host}:${config.temporal.workerMetricsPort}` } } }
        : {}),
    },
  });
}

export interface WorkerHandle {
  /** The workers currently running, main queue first (replaced when the supervisor restarts them). */
  readonly workers: Worker[];
  /** Resolves once the worker has stopped for good, after `shutdown()`. */
  running: Promise<void>;
  /** How many times the supervisor rebuilt the worker after it stopped on its own. */
  readonly restarts: number;
  shutdown(): Promise<void>;
}

const RESTART_BACKOFF_MS = { initial: 500, max: 30_000 };

export interface WorkerOptions {
  config: PlatformConfig;
  address: string;
  log: Logger;
  activities: Record<string, ActivityFunction>;
  /** The workflow modules to bundle when WORKFLOW_BUNDLE_PATH names no prebuilt bundle. */
  workflowModules: readonly string[];
  /** Queues polled beside the main one, derived from it. */
  extraTaskQueues: (mainQueue: string) => string[];
  /** Overrides config.temporal.taskQueue (tests isolate workers per file). */
  taskQueue?: string;
  /** What the workflows may tell the worker process outside their history (src/app/temporal/contract.ts). */
  sinks?: InjectedSinks<EngineDelaySinks>;
}

type WorkflowBundle = { codePath: string } | { code: string };
interface Pollers {
  workers: Worker[];
  connection: NativeConnection;
}

/** One poller per queue, all on one connection. */
async function createPollers(options: WorkerOptions, queues: string[], workflowBundle: WorkflowBundle): Promise<Pollers> {
  const { config } = options;
  const connection = await NativeConnection.connect({ address: options.address });
  try {
    const workers = await Promise.all(
      queues.map((queue) =>
        Worker.create({
          connection,
          namespace: config.temporal.namespace,
          taskQueue: queue,
          workflowBundle,
          activities: options.activities,
          ...(options.sinks ? { sinks: options.sinks } : {}),
          maxConcurrentWorkflowTaskExecutions: config.temporal.worker.workflowTaskSlots,
          workflowTaskPollerBehavior: { type: 'simple-maximum', maximum: config.temporal.worker.workflowTaskPollers },
          activityTaskPollerBehavior: { type: 'simple-maximum', maximum: config.temporal.worker.activityTaskPollers },
          // Let in-flight activities finish on shutdown before the worker gives up on them.
          shutdownGraceTime: '10s',
        }),
      ),
    );
    return { workers, connection };
  } catch (error) {
    await connection.close().catch(() => undefined);
    throw error;
  }
}

/** Runs every poller; when one stops (fatally, or by shutdown) the others stop too. */
async function runAll(workers: Worker[]): Promise<void> {
  const stopOthers = () => {
    for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
  };
  const results = await Promise.allSettled(workers.map((worker) => worker.run().finally(stopOthers)));
  const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) throw failed.reason;
}

/** A sleep that `wake()` ends early, so shutdown never waits out a restart backoff. */
function wakeableSleep() {
  let wake: () => void = () => undefined;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  return { sleep, wake: () => wake() };
}

/**
 * Starts the worker under a supervisor. The SDK worker stops fatally when Temporal stays
 * unreachable for a while; the supervisor then rebuilds the connection and the worker with
 * backoff until Temporal is back, so an outage never needs a process restart (and, in the
 * all-in-one process, never takes the API down with it). The first start fails fast instead,
 * so a misconfiguration is reported at once.
 */
export async function startWorker(options: WorkerOptions): Promise<WorkerHandle> {
  const { config, log } = options;
  installWorkerRuntime(config, log);
  const taskQueue = options.taskQueue ?? config.temporal.taskQueue;
  const bundlePath = config.temporal.workflowBundlePath;
  // Bundled once: a restart must not pay for webpack again.
  const workflowBundle = bundlePath ? { codePath: bundlePath } : { code: await bundleWorkflows(options.workflowModules) };
  const queues = [taskQueue, ...options.extraTaskQueues(taskQueue)];
  const create = () => createPollers(options, queues, workflowBundle);

  const state = { current: await create(), stopping: false, restarts: 0 };
  const pause = wakeableSleep();
  const running = (async () => {
    for (;;) {
      try {
        await runAll(state.current.workers);
      } catch (error) {
        if (!state.stopping) log.error({ err: error }, 'worker stopped with an error');
      } finally {
        await state.current.connection.close().catch(() => undefined);
      }
      if (state.stopping || !(await restart(state, { create, sleep: pause.sleep, log }))) return;
      log.info({ taskQueue, restarts: state.restarts }, 'worker restarted');
    }
  })();

  log.info({ taskQueue, bundle: bundlePath ?? 'built at start' }, 'worker started');
  return {
    get workers() {
      return state.current.workers;
    },
    get restarts() {
      return state.restarts;
    },
    running,
    shutdown: async () => {
      state.stopping = true;
      pause.wake();
      for (const worker of state.current.workers) if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    },
  };
}

/** What a restart uses: how to build the pollers, how to wait between tries (shutdown wakes it), and the log. */
interface Rebuild {
  create: () => Promise<Pollers>;
  sleep: (ms: number) => Promise<void>;
  log: Logger;
}

/** Rebuilds the pollers with backoff until it succeeds (true) or shutdown begins (false). */
async function restart(
  state: { current: Pollers; stopping: boolean; restarts: number },
  { create, sleep, log }: Rebuild,
): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    const delayMs = Math.min(RESTART_BACKOFF_MS.max, RESTART_BACKOFF_MS.initial * 2 ** attempt);
    log.warn({ delayMs, attempt: attempt + 1 }, 'restarting the worker');
    await sleep(delayMs);
    if (state.stopping) return false;
    try {
      state.current = await create();
      state.restarts += 1;
      return true;
    } catch (error) {
      log.warn({ err: error }, 'worker restart failed; will retry');
    }
  }
}
