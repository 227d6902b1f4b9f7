/**
 * The Temporal worker: runs every workflow of `workflows/` and every activity of `activities/`
 * on one task queue. Scale it out by running more `npm run worker` processes.
 */
import path from 'node:path';
import { type LogLevel, type LogMetadata, NativeConnection, Runtime, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';
import type { Config } from './config';
import type { Logger } from './log';

export const WORKFLOWS_ENTRY = path.resolve(__dirname, '..', 'workflows', 'index.ts');

/** Bundles the workflow code once (tests do it in the global setup; production at build time). */
export async function bundleWorkflows(): Promise<string> {
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_ENTRY, logger: quietBundlerLogger });
  return code;
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
export function installWorkerRuntime(config: Config, log: Logger): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const sdkLog = log.child({ component: 'temporal-sdk' });
  Runtime.install({
    logger: {
      log: (level: LogLevel, message: string, meta?: LogMetadata) => sdkLog[PINO_LEVEL[level]](meta ?? {}, message),
      trace: (message: string, meta?: LogMetadata) => sdkLog.trace(meta ?? {}, message),
      debug: (message: string, meta?: LogMetadata) => sdkLog.debug(meta ?? {}, message),
      info: (message: string, meta?: LogMetadata) => sdkLog.debug(meta ?? {}, message),
      warn: (message: string, meta?: LogMetadata) => sdkLog.warn(meta ?? {}, message),
      error: (message: string, meta?: LogMetadata) => sdkLog.error(meta ?? {}, message),
    },
    ...(config.temporal.workerMetricsPort > 0
      ? {
          telemetryOptions: {
            metrics: { prometheus: { bindAddress: `${config.http.host}:${config.temporal.workerMetricsPort}` } },
          },
        }
      : {}),
  });
}

export interface WorkerHandle {
  worker: Worker;
  /** Resolves when the worker has stopped (after `shutdown()` or a fatal error). */
  running: Promise<void>;
  shutdown(): Promise<void>;
}

export async function startWorker(options: {
  config: Config;
  address: string;
  log: Logger;
  deps: ActivityDeps;
  /** Overrides config.temporal.taskQueue (tests isolate workers per file). */
  taskQueue?: string;
}): Promise<WorkerHandle> {
  const { config, log } = options;
  installWorkerRuntime(config, log);
  const connection = await NativeConnection.connect({ address: options.address });
  const bundlePath = config.temporal.workflowBundlePath;
  const worker = await Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: options.taskQueue ?? config.temporal.taskQueue,
    ...(bundlePath ? { workflowBundle: { codePath: bundlePath } } : { workflowsPath: WORKFLOWS_ENTRY }),
    activities: createActivities(options.deps),
    // Let in-flight activities finish on shutdown before the worker gives up on them.
    shutdownGraceTime: '10s',
  });
  const running = worker
    .run()
    .catch((error: unknown) => {
      log.error({ err: error }, 'worker stopped with an error');
      throw error;
    })
    .finally(() => connection.close().catch(() => undefined));
  log.info({ taskQueue: options.taskQueue ?? config.temporal.taskQueue, bundle: bundlePath ?? 'built at start' }, 'worker started');
  return {
    worker,
    running,
    shutdown: async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
    },
  };
}
