/**
 * `npm run cluster`: the production topology on one machine, without Docker.
 *
 *   Postgres ── Temporal server (N history shards) ── Web UI
 *      │               │
 *      └── CLUSTER_WORKERS × `worker` ── CLUSTER_API_REPLICAS × `serve` on PORT, PORT+1, …
 *
 * Every program is a real process, configured the way a deployment configures it (environment
 * variables; the Temporal server through deploy/temporal/cluster.yaml, which docker-compose.yml
 * uses too). Stopping goes in the reverse order, so requests drain before workers, workers
 * before Temporal, Temporal before Postgres.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { temporal as proto } from '@temporalio/proto';
import { childEnvironment } from '../app/config';
import type { ClusterConfig } from './settings';
import type { Logger } from '../app/log';
import { loadSecretKeys } from '../app/secrets';
import { bundleWorkflows } from '../app/temporal/worker';
import { WORKFLOW_MODULES } from '../main/worker-code';
import { clusterBinaries } from './binaries';
import { clusterPostgres, ensureTemporalSchemas, type ClusterPostgres } from './postgres';
import { startProcess, waitUntil, type ManagedProcess } from './process';
import { ensureNamespace, REPO_ROOT, startTemporalServer } from './temporal-server';
import { clusterDir, removeClusterState, writeClusterState, type ClusterState } from './state';
import { startUiServer } from './ui-server';

export interface RunningCluster {
  state: ClusterState;
  /** Stops everything in order; idempotent. */
  stop(): Promise<void>;
}

/** What started so far, each with its stop, in order of start. */
type Started = { name: string; stop: () => Promise<void> }[];
type ServiceEnv = (overrides: Record<string, string>) => NodeJS.ProcessEnv;
type TemporalServer = Awaited<ReturnType<typeof startTemporalServer>>;

/** What every step of a launch shares: the settings, the cluster's folder and its logs' folder, the log, and what started so far. */
interface Launch {
  config: ClusterConfig;
  dir: string;
  logDir: string;
  log: Logger;
  started: Started;
}

/** Binaries, Postgres and the workflow bundle side by side, then Temporal's schemas in Postgres. */
async function prepareCluster({ config, dir, log, started }: Launch) {
  const bundleFile = path.join(dir, 'workflow-bundle.js');
  // Side by side; settled rather than raced, so a Postgres that started is stopped when
  // building a binary or the bundle fails.
  const [binaries, postgres, bundle] = await Promise.allSettled([
    clusterBinaries(config, log),
    clusterPostgres(config, dir, log),
    bundleWorkflows(WORKFLOW_MODULES).then((code) => fs.writeFile(bundleFile, code)),
  ]);
  if (postgres.status === 'fulfilled') started.push({ name: 'postgres', stop: postgres.value.stop });
  const { sqlTool, server: serverBinary, uiServer } = valueOf(binaries);
  const pg = valueOf(postgres);
  valueOf(bundle);
  await ensureTemporalSchemas(pg, sqlTool, log);
  return { bundleFile, serverBinary, uiServer, pg };
}

async function startTemporal({ config, logDir, log, started }: Launch, binary: string, pg: ClusterPostgres) {
  const server = await startTemporalServer({ config, binary, postgres: pg, logDir });
  started.push({ name: 'temporal-server', stop: () => server.stop(30_000) });
  watch(server, log);
  await ensureNamespace(server.address, config.temporal.namespace, log);
  return server;
}

/** The Web UI is optional: the cluster runs without it when it does not start. */
async function startUi({ config, logDir, log, started }: Launch, binary: string | undefined, temporalAddress: string) {
  const ui = binary
    ? await startUiServer({ config, binary, temporalAddress, logDir }).catch((error: unknown) => {
        log.warn({ err: error }, 'the Temporal Web UI did not start; the cluster runs without it');
        return undefined;
      })
    : undefined;
  if (ui) started.push({ name: 'temporal-ui', stop: () => ui.stop() });
  return ui;
}

/** What the services run on: the cluster's Postgres, its Temporal server and the workflow bundle's file. */
interface ServiceBackends {
  pg: ClusterPostgres;
  server: TemporalServer;
  bundleFile: string;
}

/** The environment of `serve` and `worker` processes: the cluster's servers, bundle and secret key. */
async function clusterServiceEnv({ config, dir }: Launch, { pg, server, bundleFile }: ServiceBackends): Promise<ServiceEnv> {
  const secretKey =
    config.secretKey ??
    (await loadSecretKeys({ configured: undefined, previous: undefined, dataDir: dir, embedded: true })).current.toString('hex');
  return (overrides) =>
    childEnvironment({
      DATA_DIR: dir,
      DATABASE_URL: pg.url,
      TEMPORAL_ADDRESS: server.address,
      WORKFLOW_BUNDLE_PATH: bundleFile,
      SECRET_KEY: secretKey,
      ...overrides,
    });
}

/** CLUSTER_WORKERS workers, up once Temporal lists each among the task queue's pollers. */
async function startWorkers({ config, logDir, log, started }: Launch, serverAddress: string, serviceEnv: ServiceEnv) {
  const workers = await Promise.all(
    Array.from({ length: config.cluster.workers }, async (_, i) => {
      const metricsPort = config.temporal.workerMetricsPort > 0 ? config.temporal.workerMetricsPort + i : undefined;
      const env = serviceEnv({ WORKER_METRICS_PORT: String(metricsPort ?? 0) });
      const worker = await startRoleProcess({ role: 'worker', index: i + 1, env, logDir });
      started.push({ name: worker.name, stop: () => worker.stop(config.http.shutdownGraceMs + 15_000) });
      return { process: worker, metricsPort };
    }),
  );
  await Promise.all(workers.map(({ process }) => waitForPoller(serverAddress, config, process)));
  workers.forEach(({ process }) => watch(process, log));
  return workers;
}

/** CLUSTER_API_REPLICAS API replicas on PORT, PORT+1, …, up once each `/ready` answers 200. */
async function startApis({ config, logDir, log, started }: Launch, serviceEnv: ServiceEnv) {
  const apis = await Promise.all(
    Array.from({ length: config.cluster.apiReplicas }, async (_, i) => {
      const port = config.http.port + i;
      const api = await startRoleProcess({ role: 'api', index: i + 1, env: serviceEnv({ PORT: String(port) }), logDir });
      started.push({ name: api.name, stop: () => api.stop(config.http.shutdownGraceMs + config.http.shutdownReadyDelayMs + 5000) });
      return { process: api, url: `http://${config.http.host}:${port}` };
    }),
  );
  await Promise.all(
    apis.map(({ process, url }) => waitUntil(`${process.name} /ready answered 200`, () => ready(url), { process, timeoutMs: 90_000 })),
  );
  apis.forEach(({ process }) => watch(process, log));
  return apis;
}

export async function launchCluster(config: ClusterConfig, log: Logger): Promise<RunningCluster> {
  const dir = clusterDir(config.dataDir);
  const logDir = path.join(dir, 'logs');
  await fs.mkdir(logDir, { recursive: true });
  // Stops in reverse order of start; on a failed start, whatever did start is stopped.
  const started: Started = [];
  const stopAll = async () => {
    for (const part of started.reverse()) {
      await part.stop().catch((error: unknown) => log.warn({ err: error, part: part.name }, 'stop failed'));
      log.info({ part: part.name }, 'stopped');
    }
  };
  const launch: Launch = { config, dir, logDir, log, started };
  try {
    const { bundleFile, serverBinary, uiServer, pg } = await prepareCluster(launch);
    const server = await startTemporal(launch, serverBinary, pg);
    const ui = await startUi(launch, uiServer, server.address);
    const serviceEnv = await clusterServiceEnv(launch, { pg, server, bundleFile });
    // Workers first: an API replica that acks work before any worker polls only queues it.
    const workers = await startWorkers(launch, server.address, serviceEnv);
    const apis = await startApis(launch, serviceEnv);

    const state: ClusterState = {
      launcherPid: process.pid,
      temporal: { address: server.address, pid: server.pid, historyShards: config.cluster.historyShards },
      ui: ui ? { url: ui.url, pid: ui.pid } : undefined,
      postgres: { embedded: pg.embedded, port: pg.port },
      api: apis.map(({ process, url }) => ({ url, pid: process.pid })),
      workers: workers.map(({ process, metricsPort }) => ({ pid: process.pid, metricsPort })),
      logDir,
    };
    await writeClusterState(config.dataDir, state, pg.url);
    let stopping: Promise<void> | undefined;
    return {
      state,
      stop: () => (stopping ??= stopAll().finally(() => removeClusterState(config.dataDir))),
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

function valueOf<T>(result: PromiseSettledResult<T>): T {
  if (result.status === 'rejected') throw result.reason;
  return result.value;
}

/** One `serve` or `worker` process of the cluster: its role and number, its environment, and where its log goes. */
interface RoleProcess {
  role: 'api' | 'worker';
  index: number;
  env: NodeJS.ProcessEnv;
  logDir: string;
}

/** `serve` or `worker` from the sources, as its own process (tsx compiles on load, like `npm start`). */
function startRoleProcess({ role, index, env, logDir }: RoleProcess): Promise<ManagedProcess> {
  const entry = path.join(REPO_ROOT, 'src', 'bin', role === 'api' ? 'serve.ts' : 'worker.ts');
  return startProcess({
    name: `${role}-${index}`,
    command: process.execPath,
    args: ['--import', 'tsx', entry],
    cwd: REPO_ROOT,
    env,
    logFile: path.join(logDir, `${role}-${index}.log`),
  });
}

/** A process that ends while the cluster runs is reported, not restarted: a supervisor's job in production. */
function watch(child: ManagedProcess, log: Logger): void {
  void child.exited.then(({ code, signal }) => log.warn({ process: child.name, pid: child.pid, code, signal }, 'cluster process exited'));
}

async function ready(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/ready`, { signal: AbortSignal.timeout(2000) })).status === 200;
  } catch {
    return false;
  }
}

/**
 * A worker is up when Temporal lists it among the pollers of the task queue: the SDK's default
 * identity is `<pid>@<hostname>`.
 */
async function waitForPoller(address: string, config: ClusterConfig, worker: ManagedProcess): Promise<void> {
  const connection = await Connection.connect({ address });
  const identity = `${worker.pid}@${os.hostname()}`;
  try {
    await waitUntil(
      `${worker.name} polls ${config.temporal.taskQueue}`,
      async () => {
        const { pollers } = await connection.workflowService.describeTaskQueue({
          namespace: config.temporal.namespace,
          taskQueue: { name: config.temporal.taskQueue, kind: proto.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
          taskQueueType: proto.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        });
        return (pollers ?? []).some((poller) => poller.identity === identity);
      },
      { process: worker, timeoutMs: 90_000 },
    );
  } finally {
    await connection.close();
  }
}
