/** The worker process's parts: every feature's workflows, activities, task queues, sweeps and schedules. */
import type { ActivityFunction, Feature, WorkerDeps } from '../app/feature';
import type { IngressGateway } from '../app/ingress';
import { ensureSchedules } from '../app/temporal/schedules';
import { startWorker, type WorkerHandle } from '../app/temporal/worker';
import { LagRecorder, lagSinks, startEngineDelayPublisher } from '../app/engine-delay';
import { FEATURES, taskQueuesOf } from './features';
import { WORKFLOW_MODULES, workerCode, type WorkerCodeOptions } from './worker-code';
import { unadmittedGateway } from './gateway';
import { platformValues, settingsOf, type Infrastructure } from './infrastructure';

/** The worker's gateway to Temporal's workflows: it admits nothing itself (src/main/gateway.ts). */
function workerGateway(infra: Infrastructure): IngressGateway {
  return unadmittedGateway({ temporal: infra.temporal, db: infra.database.db, log: infra.log, config: infra.config });
}

/** What a worker process hands each feature. */
function workerDeps(infra: Infrastructure, feature: Feature, ingress: IngressGateway): WorkerDeps<unknown> {
  return {
    settings: settingsOf(infra.config, feature),
    platform: platformValues(infra.config),
    db: infra.database.db,
    log: infra.log,
    ingress,
    secretKey: infra.secretKey,
  };
}

/** Every feature's activities, keyed by the name workflows proxy them by. */
function workerActivities(infra: Infrastructure, options: WorkerCodeOptions): Record<string, ActivityFunction> {
  const activities: Record<string, ActivityFunction> = {};
  const ingress = workerGateway(infra);
  for (const { feature, activities: build } of workerCode(options)) {
    for (const [name, activity] of Object.entries(build(workerDeps(infra, feature, ingress)))) {
      if (name in activities) throw new Error(`activity ${name} is registered by two features`);
      activities[name] = activity;
    }
  }
  return activities;
}

/**
 * Starts a worker for every feature's workflows, activities and task queues, and publishes what it
 * measures of the engine's delay on them (src/app/engine-delay.ts) until it stops.
 */
export async function startFeatureWorker(
  infra: Infrastructure,
  options: WorkerCodeOptions & { address: string; taskQueue?: string },
): Promise<WorkerHandle> {
  const recorder = new LagRecorder();
  const handle = await startWorker({
    config: infra.config,
    address: options.address,
    log: infra.log,
    taskQueue: options.taskQueue,
    activities: workerActivities(infra, options),
    workflowModules: WORKFLOW_MODULES,
    extraTaskQueues: (mainQueue) => taskQueuesOf(mainQueue).slice(1),
    sinks: lagSinks(recorder),
  });
  const publisher = startEngineDelayPublisher({
    db: infra.database.db,
    connection: infra.temporal.connection,
    namespace: infra.config.temporal.namespace,
    taskQueues: taskQueuesOf(options.taskQueue ?? infra.config.temporal.taskQueue),
    recorder,
    intervalMs: infra.config.engineDelay.intervalMs,
    log: infra.log,
  });
  const shutdown = handle.shutdown.bind(handle);
  return Object.assign(handle, {
    shutdown: async () => {
      await publisher.stop();
      await shutdown();
    },
  });
}

/** The worker role's periodic jobs, each feature's, on their own intervals. */
export function startSweeps(infra: Infrastructure): { stop(): void } {
  const ingress = workerGateway(infra);
  const timers = FEATURES.flatMap((feature) =>
    (feature.sweeps ?? []).map((sweep) => {
      const timer = setInterval(() => {
        sweep
          .run(workerDeps(infra, feature, ingress), new Date())
          .catch((error: unknown) => infra.log.warn({ err: error, sweep: sweep.name }, 'sweep failed; retrying at the next interval'));
      }, sweep.intervalMs);
      timer.unref();
      return timer;
    }),
  );
  return { stop: () => timers.forEach((timer) => clearInterval(timer)) };
}

/** Creates or updates every feature's Temporal Schedules, on this process's task queue. */
export async function ensureFeatureSchedules(infra: Infrastructure): Promise<void> {
  const ingress = workerGateway(infra);
  const schedules = FEATURES.flatMap((feature) => feature.schedules?.(workerDeps(infra, feature, ingress)) ?? []);
  await ensureSchedules(infra.temporal.client, infra.temporal.taskQueue, schedules);
}
