/**
 * The stack that `npm run bench`, `npm run chaos` and `npm run fuzz` drive: an embedded Postgres
 * and Temporal dev server as children of this script (so faults can be injected into them), and
 * the service's real entry points as separate processes — a worker, an API, and for the bench an
 * API with the enqueue switched off. Everything listens on 127.0.0.1 only, on free ports.
 */
import { FAIRNESS_DYNAMIC_CONFIG } from '../../src/app/temporal/fairness';
import { ping } from '../../workflows/ping';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { SEARCH_ATTRIBUTES } from '../../src/main/features';
import { loadConfig } from '../../src/main/config';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/app/store/embedded-postgres';
import { createLogger } from '../../src/app/log';
import { openDatabase, type DbHandle } from '../../src/app/store/db';
import { migrateToLatest } from '../../src/app/store/migrate';
import { createTemporalClient, type TemporalClientHandle } from '../../src/app/temporal/client';
import {
  findTemporalCli,
  startDevServer,
  type CliLocation,
  type DevServer,
  type DevServerOptions,
} from '../../src/app/temporal/dev-server';
import { freePort } from '../../test/harness/ports';
import { startFakeSlack, type FakeSlack } from '../../test/harness/slack';
import { waitFor } from '../../test/harness/wait';

const root = path.resolve(__dirname, '../..');
const log = createLogger({ level: 'warn', name: 'bench' });

class ServiceProcess {
  child: ChildProcess | undefined;
  output = '';
  constructor(
    readonly name: string,
    readonly entry: string,
    readonly env: Record<string, string | undefined>,
    readonly url?: string,
  ) {}

  start(): void {
    this.child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(root, this.entry)], {
      cwd: root,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...this.env } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString('utf8')).slice(-200_000);
    };
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  alive(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  async kill(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.child;
    if (!child || !this.alive()) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  }

  async ready(timeoutMs = 60_000): Promise<void> {
    if (!this.url) return;
    await waitFor(async () => (await fetch(`${this.url}/ready`)).status === 200, timeoutMs, { intervalMs: 200 });
  }
}

/** The task queue of the bench's workers; the ceiling starts its workflows on one nobody polls. */
export const BENCH_TASK_QUEUE = 'bench';

/** The environment of the service's processes under the bench, whichever topology runs them. */
export function serviceEnvironment(options: {
  dataDir: string;
  databaseUrl: string;
  temporalAddress?: string;
  secretKey: string;
  githubSecret: string;
  slackApiUrl: string;
}): Record<string, string> {
  return {
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATA_DIR: options.dataDir,
    DATABASE_URL: options.databaseUrl,
    ...(options.temporalAddress ? { TEMPORAL_ADDRESS: options.temporalAddress } : {}),
    TEMPORAL_TASK_QUEUE: BENCH_TASK_QUEUE,
    SECRET_KEY: options.secretKey,
    GITHUB_WEBHOOK_SECRET: options.githubSecret,
    SLACK_API_BASE_URL: options.slackApiUrl,
    // Production requires it (connect links); nothing opens them in a bench.
    APP_BASE_URL: 'http://127.0.0.1:8080',
    DATABASE_POOL_MAX: '20',
  };
}

/** What the load scenarios drive: one API or several replicas, and the Temporal and Postgres behind them. */
export interface LoadStack {
  /** What ran, for the results. */
  description: string;
  /** The load is spread over these, connection by connection. */
  apiUrls: string[];
  /** The same API with BENCH_DISABLE_ENQUEUE=true, where there is one. */
  apiNoEnqueueUrl?: string;
  workerPids: number[];
  /** Each part's processes, for the CPU table (a part's share includes its children). */
  processes: Record<string, number[]>;
  database: DbHandle;
  temporal: TemporalClientHandle;
  secretKey: string;
  githubSecret: string;
  /** Slack's Web API on loopback: a bot token must be issued by it to be taken. */
  slack: FakeSlack;
  stop(): Promise<void>;
}

/** The embedded stack as the load scenarios see it. */
export function asLoadStack(stack: BenchStack): LoadStack {
  return {
    description: 'embedded Temporal dev server (SQLite) and Postgres, one API and one worker process',
    apiUrls: [stack.api.url!],
    apiNoEnqueueUrl: stack.apiNoEnqueue?.url,
    workerPids: stack.worker.pid === undefined ? [] : [stack.worker.pid],
    processes: {
      api: [stack.api.pid!],
      worker: [stack.worker.pid!],
      temporal: [stack.temporalServer.pid!],
      postgres: [stack.postgres.pid!],
    },
    database: stack.database,
    temporal: stack.temporal,
    secretKey: stack.env.SECRET_KEY!,
    githubSecret: stack.secrets.github,
    slack: stack.slack,
    stop: () => stack.stop(),
  };
}

export interface BenchStack {
  dataDir: string;
  env: Record<string, string | undefined>;
  api: ServiceProcess;
  /** The same API with BENCH_DISABLE_ENQUEUE=true: verify and ack only. */
  apiNoEnqueue?: ServiceProcess;
  worker: ServiceProcess;
  database: DbHandle;
  temporal: TemporalClientHandle;
  postgres: EmbeddedPostgres;
  temporalServer: DevServer;
  secrets: { github: string };
  slack: FakeSlack;
  /** kill -9 the Temporal dev server (its SQLite file keeps the state). */
  killTemporal(): Promise<void>;
  startTemporal(): Promise<void>;
  stopPostgres(): Promise<void>;
  startPostgres(): Promise<void>;
  stop(): Promise<void>;
}

export async function startBenchStack(
  options: {
    withNoEnqueueApi?: boolean;
    apiEnv?: Record<string, string>;
    workerEnv?: Record<string, string>;
    /** More `key=value` dynamic config for the dev server, after the fairness flags. */
    serverDynamicConfig?: string[];
  } = {},
): Promise<BenchStack> {
  const config = loadConfig();
  const dataDir = path.join(config.dataDir, 'bench', `${Date.now()}`);
  await fs.mkdir(dataDir, { recursive: true });
  const pgPort = await freePort();

  const postgresOptions = { dataDir, port: pgPort, log, logFile: path.join(dataDir, 'postgres.log') };
  let postgres = await startEmbeddedPostgres(postgresOptions);
  const cli: CliLocation = await findTemporalCli(config.temporal.cliPath, log);
  const serverOptions: DevServerOptions = {
    cli,
    port: 0,
    uiPort: 0,
    headless: true,
    dbFile: path.join(dataDir, 'temporal.db'),
    sqliteSynchronous: config.temporal.devSqliteSynchronous,
    namespace: 'default',
    searchAttributes: SEARCH_ATTRIBUTES,
    // As `npm start` runs it; the fairness bench switches the keys off in the API to compare.
    dynamicConfig: [...FAIRNESS_DYNAMIC_CONFIG, ...(options.serverDynamicConfig ?? [])],
    logFile: path.join(dataDir, 'temporal.log'),
    log,
  };
  let temporalServer: DevServer;
  try {
    temporalServer = await startOnFreePort(serverOptions);
  } catch (error) {
    // Nothing else would stop it, and its process would keep the caller (a test run) alive.
    await postgres.stop().catch(() => undefined);
    throw error;
  }

  const database = openDatabase(postgres.url, { max: 20 });
  await migrateToLatest(database.db);
  const temporal = createTemporalClient({ address: temporalServer.address, namespace: 'default', taskQueue: BENCH_TASK_QUEUE });

  const secrets = { github: randomBytes(16).toString('hex') };
  // Slack's Web API on loopback, answering ok: prompts and replies cost what they cost in production.
  const slack = await startFakeSlack();
  const env = serviceEnvironment({
    dataDir,
    databaseUrl: postgres.url,
    temporalAddress: temporalServer.address,
    secretKey: randomBytes(32).toString('hex'),
    githubSecret: secrets.github,
    slackApiUrl: slack.url,
  });

  const apiPort = await freePort();
  const api = new ServiceProcess(
    'api',
    'src/bin/serve.ts',
    { ...env, ...options.apiEnv, PORT: String(apiPort) },
    `http://127.0.0.1:${apiPort}`,
  );
  const worker = new ServiceProcess('worker', 'src/bin/worker.ts', { ...env, ...options.workerEnv });
  let apiNoEnqueue: ServiceProcess | undefined;
  if (options.withNoEnqueueApi) {
    const port = await freePort();
    apiNoEnqueue = new ServiceProcess(
      'api-no-enqueue',
      'src/bin/serve.ts',
      { ...env, ...options.apiEnv, PORT: String(port), BENCH_DISABLE_ENQUEUE: 'true', NODE_ENV: 'development' },
      `http://127.0.0.1:${port}`,
    );
  }
  for (const proc of [worker, api, apiNoEnqueue]) proc?.start();
  try {
    await Promise.all([api.ready(), apiNoEnqueue?.ready()]);
    // The worker is ready when it has completed a workflow (it bundles the workflows first).
    await waitFor(
      async () => {
        await temporal.client.workflow.execute(ping, {
          taskQueue: BENCH_TASK_QUEUE,
          workflowId: `ping/bench-ready-${randomBytes(6).toString('hex')}`,
          args: ['ready'],
          workflowExecutionTimeout: '5s',
        });
        return true;
      },
      120_000,
      { intervalMs: 500 },
    );
  } catch (error) {
    // A stack that never came up leaves nothing running behind it (what it printed helps most).
    console.error(`api output (tail):\n${api.output.slice(-2000)}`);
    for (const proc of [worker, api, apiNoEnqueue]) await proc?.kill('SIGKILL').catch(() => undefined);
    await temporal.close().catch(() => undefined);
    await database.close().catch(() => undefined);
    await temporalServer.stop().catch(() => undefined);
    await postgres.stop().catch(() => undefined);
    await slack.close();
    throw error;
  }

  const stack: BenchStack = {
    dataDir,
    env,
    api,
    apiNoEnqueue,
    worker,
    database,
    temporal,
    get postgres() {
      return postgres;
    },
    get temporalServer() {
      return temporalServer;
    },
    secrets,
    slack,
    async killTemporal() {
      if (temporalServer.pid) process.kill(temporalServer.pid, 'SIGKILL');
      await waitFor(async () => {
        try {
          process.kill(temporalServer.pid!, 0);
          return false;
        } catch {
          return true;
        }
      }, 10_000);
    },
    async startTemporal() {
      temporalServer = await startDevServer(serverOptions);
    },
    async stopPostgres() {
      await postgres.stop();
    },
    async startPostgres() {
      postgres = await startEmbeddedPostgres(postgresOptions);
    },
    async stop() {
      for (const proc of [api, apiNoEnqueue, worker]) await proc?.kill('SIGTERM');
      await temporal.close().catch(() => undefined);
      await database.close().catch(() => undefined);
      await temporalServer.stop();
      await postgres.stop();
      await slack.close();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
  return stack;
}

/** Tries of a dev server start, each on a port found free just before it. */
const DEV_SERVER_PORT_TRIES = 3;

/**
 * Starts the dev server on a port found free, trying another when the start fails: a port found
 * free can be taken before the server binds it (an outgoing connection gets one from the same
 * range), and the server then exits at start-up. `options.port` becomes the port that worked, so
 * a restart (startTemporal) comes back on the address the API and worker were given.
 */
async function startOnFreePort(options: DevServerOptions): Promise<DevServer> {
  for (let tries = 1; ; tries++) {
    options.port = await freePort();
    try {
      return await startDevServer(options);
    } catch (error) {
      if (tries === DEV_SERVER_PORT_TRIES) throw error;
      log.warn({ port: options.port, error: String(error) }, 'Temporal dev server did not start; trying another port');
    }
  }
}
