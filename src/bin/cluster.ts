import { loadConfigOrExit } from './config';
import { loadClusterConfig } from '../cluster/settings';
import { createLogger } from '../app/log';
import { launchCluster } from '../cluster/launch';
import { killAll } from '../cluster/process';
import { onStopSignals } from './signals';

/**
 * `npm run cluster`: starts the production topology on this machine (src/cluster/launch.ts) and
 * stops all of it, in order, on Ctrl-C. A second Ctrl-C kills what is left and exits.
 */
async function runCluster(): Promise<void> {
  const config = loadConfigOrExit(() => loadClusterConfig());
  const log = createLogger({ level: config.logLevel, name: 'cluster' });
  const started = Date.now();
  let stopRequested = false;
  let cluster: Awaited<ReturnType<typeof launchCluster>> | undefined;
  onStopSignals({
    stop: (signal) => {
      stopRequested = true;
      log.info({ signal }, 'stopping the cluster');
      // Still starting: launchCluster returns (or fails) first, then the cluster is stopped below.
      if (!cluster) return;
      cluster.stop().then(
        () => process.exit(0),
        (error: unknown) => {
          log.error({ err: error }, 'stop failed');
          process.exit(1);
        },
      );
    },
    force: (signal) => {
      log.warn({ signal }, 'second signal: killing every cluster process');
      killAll();
      process.exit(130);
    },
  });
  try {
    cluster = await launchCluster(config, log);
  } catch (error) {
    log.fatal({ err: error }, 'the cluster did not start');
    process.exit(1);
  }
  if (stopRequested) {
    await cluster.stop();
    process.exit(0);
  }
  const { state } = cluster;
  log.info({ ...state, startupMs: Date.now() - started }, 'cluster ready');
  process.stdout.write(
    [
      '',
      ...state.api.map((api, i) => `  API replica ${i + 1}  ${api.url}`),
      `  Workers        ${state.workers.length} (pids ${state.workers.map((w) => w.pid).join(', ')})`,
      `  Temporal       ${state.temporal.address} (${state.temporal.historyShards} history shards, Postgres)`,
      state.ui ? `  Temporal UI    ${state.ui.url}` : '  Temporal UI    not running (see the log above)',
      `  Logs           ${state.logDir}`,
      `  den            uses this cluster's Postgres while it runs (same DATA_DIR, DATABASE_URL unset)`,
      '',
    ].join('\n') + '\n',
  );
}

void runCluster();
