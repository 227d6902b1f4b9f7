/** The worker process's parts: every feature's workflows, activities, task queues, sweeps and schedules. */
import type { ActivityFunction, Feature, WorkerDeps } from '../app/feature';
import type { IngressGateway } from '../app/ingress';
import { ensureSchedules } from '../app/temporal/schedules';
import { startWorker } from '../app/temporal/worker';
import { FEATURES } from './features';
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

/** Starts a worker for every feature's workflows, activities and task queues. */
export function startFeatureWorker(infra: Infrastructure, options: WorkerCodeOptions & { address: string; taskQueue?: string }) {
  return startWorker({
    config: infra.config,
    address: options.address,
    log: infra.log,
    taskQueue: options.taskQueue,
    activities: workerActivities(infra, options),
    workflowModules: WORKFLOW_MODULES,
    extraTaskQueues: (mainQueue) => FEATURES.flatMap((feature) => feature.taskQueues?.(mainQueue) ?? []),
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
