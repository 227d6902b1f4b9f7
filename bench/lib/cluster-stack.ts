/**
 * `npm run bench -- --cluster`: the production topology as the bench's target. The
 * project's own `npm run cluster` entry point runs as a child process — Temporal server v1.29.1
 * with its history shards on Postgres, API replicas and workers, each its own process — on a
 * Postgres this script starts and hands over as `DATABASE_URL`, so it can read the records.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../../src/main/config';
import { createLogger } from '../../src/app/log';
import { openDatabase } from '../../src/app/store/db';
import { startEmbeddedPostgres } from '../../src/app/store/embedded-postgres';
import { migrateToLatest } from '../../src/app/store/migrate';
import { createTemporalClient } from '../../src/app/temporal/client';
import { launchClusterProcess } from '../../test/harness/cluster';
import { freePort } from '../../test/harness/ports';
import { startFakeSlack } from '../../test/harness/slack';
import { BENCH_TASK_QUEUE, serviceEnvironment, type LoadStack } from './stack';

export async function startClusterLoadStack(options: { env?: Record<string, string> } = {}): Promise<LoadStack> {
  const config = loadConfig();
  const dataDir = path.join(config.dataDir, 'bench', `cluster-${Date.now()}`);
  await fs.mkdir(dataDir, { recursive: true });
  const postgres = await startEmbeddedPostgres({
    dataDir,
    port: await freePort(),
    log: createLogger({ level: 'warn', name: 'bench' }),
    logFile: path.join(dataDir, 'postgres.log'),
  });
  const database = openDatabase(postgres.url, { max: 20 });
  const githubSecret = randomBytes(16).toString('hex');
  const secretKey = randomBytes(32).toString('hex');
  const slack = await startFakeSlack();
  try {
    await migrateToLatest(database.db);
    const cluster = await launchClusterProcess({
      ...serviceEnvironment({ dataDir, databaseUrl: postgres.url, secretKey, githubSecret, slackApiUrl: slack.url }),
      // The default pool, as `npm run cluster` runs: Temporal's own pools (maxConns in
      // deploy/temporal/cluster.yaml) share this Postgres's max_connections (200) with every
      // replica and worker.
      DATABASE_POOL_MAX: '10',
      ...options.env,
      DATA_DIR: dataDir,
    });
    const { state } = cluster;
    const temporal = createTemporalClient({ address: state.temporal.address, namespace: 'default', taskQueue: BENCH_TASK_QUEUE });
    return {
      description: `npm run cluster: Temporal server (${state.temporal.historyShards} history shards, Postgres persistence and visibility), ${state.api.length} API replicas and ${state.workers.length} workers as separate processes, and Postgres`,
      apiUrls: state.api.map((api) => api.url),
      workerPids: state.workers.map((worker) => worker.pid),
      processes: {
        api: state.api.map((api) => api.pid),
        worker: state.workers.map((worker) => worker.pid),
        temporal: [state.temporal.pid],
        postgres: [postgres.pid!],
      },
      database,
      temporal,
      secretKey,
      githubSecret,
      slack,
      async stop() {
        await temporal.close().catch(() => undefined);
        await cluster.stop();
        // The parts' logs and the launcher's own outlive the run, for reading what happened.
        const kept = path.join(config.dataDir, 'bench', `cluster-logs-${Date.now()}`);
        await fs.cp(state.logDir, kept, { recursive: true }).catch(() => undefined);
        await fs.writeFile(path.join(kept, 'launcher.log'), cluster.launcher.output()).catch(() => undefined);
        console.error(`cluster logs: ${path.relative(process.cwd(), kept)}`);
        await database.close().catch(() => undefined);
        await postgres.stop();
        await slack.close();
        await fs.rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await database.close().catch(() => undefined);
    await postgres.stop().catch(() => undefined);
    await slack.close();
    throw error;
  }
}
