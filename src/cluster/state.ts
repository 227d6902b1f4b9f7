/**
 * Where a running `npm run cluster` says what it is: DATA_DIR/cluster/cluster.json (ports, pids,
 * logs) and, apart from it and readable by its owner only, the service database's URL. `den`
 * reads both, so while a cluster runs its commands reach the cluster's Postgres, not `npm start`'s.
 */
import fs from 'node:fs/promises';
import path from 'node:path';

/** What a running cluster looks like, written to DATA_DIR/cluster/cluster.json for tests, the bench and `den`. */
export interface ClusterState {
  /** The launcher's process: the state is current only while it lives. */
  launcherPid: number;
  temporal: { address: string; pid: number; historyShards: number };
  ui: { url: string; pid: number } | undefined;
  postgres: { embedded: boolean; port: number };
  api: { url: string; pid: number }[];
  workers: { pid: number; metricsPort: number | undefined }[];
  logDir: string;
}

/** The cluster's own directory under DATA_DIR: its embedded Postgres, secret key, bundle and logs. */
export function clusterDir(dataDir: string): string {
  return path.join(dataDir, 'cluster');
}

function stateFile(dataDir: string): string {
  return path.join(clusterDir(dataDir), 'cluster.json');
}

/** The URL holds the database password, so it is kept out of the state file, which is logged. */
function databaseUrlFile(dataDir: string): string {
  return path.join(clusterDir(dataDir), 'database-url');
}

export async function writeClusterState(dataDir: string, state: ClusterState, databaseUrl: string): Promise<void> {
  await fs.writeFile(databaseUrlFile(dataDir), `${databaseUrl}\n`, { mode: 0o600 });
  await fs.writeFile(stateFile(dataDir), `${JSON.stringify(state, null, 2)}\n`);
}

export async function removeClusterState(dataDir: string): Promise<void> {
  await fs.rm(stateFile(dataDir), { force: true });
  await fs.rm(databaseUrlFile(dataDir), { force: true });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The database of the cluster running under `dataDir`, or undefined when none runs there: no
 * state file, or one left behind by a launcher that was killed.
 */
export async function runningClusterDatabase(dataDir: string): Promise<{ url: string; dir: string } | undefined> {
  let state: ClusterState;
  try {
    state = JSON.parse(await fs.readFile(stateFile(dataDir), 'utf8')) as ClusterState;
  } catch {
    return undefined;
  }
  if (typeof state.launcherPid !== 'number' || !alive(state.launcherPid)) return undefined;
  try {
    return { url: (await fs.readFile(databaseUrlFile(dataDir), 'utf8')).trim(), dir: clusterDir(dataDir) };
  } catch {
    return undefined;
  }
}
