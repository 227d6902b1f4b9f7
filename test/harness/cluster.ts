/**
 * `npm run cluster`'s entry point as a child process, the way an operator starts it, on free
 * 127.0.0.1 ports: used by the cluster tests and by `npm run bench -- --cluster`.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ClusterState } from '../../src/cluster/state';
import { freePort, freePortRange, isFree } from './ports';
import { spawnImportEntry, type Spawned } from './process';
import { waitFor } from './wait';

export interface ClusterProcess {
  state: ClusterState;
  launcher: Spawned;
  /** Ctrl-C to the launcher (it stops every part in order); kill -9 of its group after 90 s. */
  stop(): Promise<void>;
}

/**
 * A port base whose derived Temporal ports are all free: deploy/temporal/cluster.yaml puts the
 * services at +1, +2, +6, HTTP at +10, metrics at +767 and membership at −300 … −294.
 */
async function freeTemporalPort(): Promise<number> {
  const offsets = [0, 1, 2, 6, 10, 767, -300, -299, -298, -294];
  for (let tries = 0; tries < 50; tries++) {
    const base = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await Promise.all(offsets.map((offset) => isFree(base + offset)));
    if (free.every(Boolean)) return base;
  }
  throw new Error('no free port range for the Temporal server');
}

/**
 * Starts the cluster with `env` (DATA_DIR is required; the ports are chosen here) and waits for
 * its state file, which the launcher writes once every replica answers /ready.
 */
export async function launchClusterProcess(env: Record<string, string> & { DATA_DIR: string }): Promise<ClusterProcess> {
  const replicas = Number(env.CLUSTER_API_REPLICAS ?? 2);
  const launcher = spawnImportEntry('src/bin/cluster.ts', {
    HOST: '127.0.0.1',
    PORT: String(await freePortRange(replicas)),
    CLUSTER_TEMPORAL_PORT: String(await freeTemporalPort()),
    CLUSTER_UI_PORT: String(await freePort()),
    ...env,
  });
  const stop = async () => {
    if (launcher.child.exitCode !== null || launcher.child.signalCode !== null) return;
    launcher.child.kill('SIGINT');
    const stopped = await Promise.race([
      launcher.exited.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 90_000).unref()),
    ]);
    if (!stopped) process.kill(-launcher.child.pid!, 'SIGKILL');
  };
  const stateFile = path.join(env.DATA_DIR, 'cluster', 'cluster.json');
  try {
    const state = await waitFor(
      async () => {
        const exited = await Promise.race([launcher.exited, new Promise((resolve) => setTimeout(() => resolve(undefined), 10))]);
        if (exited) throw new Error(`npm run cluster exited: ${JSON.stringify(exited)}`);
        return JSON.parse(await fs.readFile(stateFile, 'utf8')) as ClusterState;
      },
      // A fresh machine builds the Temporal server, its SQL tool and the UI server first.
      15 * 60_000,
      { what: 'the cluster to be ready', intervalMs: 500 },
    );
    return { state, launcher, stop };
  } catch (error) {
    await stop();
    throw new Error(`${String(error)}\n--- launcher output ---\n${launcher.output()}`);
  }
}
