/**
 * The embedded Temporal: `temporal server start-dev` as a child process, persisted to SQLite
 * under DATA_DIR. Used when TEMPORAL_ADDRESS is unset, and by the test suite's global setup.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Connection } from '@temporalio/client';

import type { SearchAttributeKey } from './search-attributes';
import type { Logger } from '../log';
import { goBinDir, goInstall, isExecutable, onPath } from './go-binaries';

/** v1.5.1 is the newest CLI whose go.mod has no `replace` directive, so `go install` works. */
const TEMPORAL_CLI_MODULE = 'github.com/temporalio/cli/cmd/temporal@v1.5.1';

type CliSource = 'TEMPORAL_CLI' | 'PATH' | 'GOPATH' | 'go install' | 'sdk download';

export interface CliLocation {
  path: string | undefined;
  source: CliSource;
}

/**
 * Finds the Temporal CLI, trying in this order:
 * TEMPORAL_CLI, `temporal` on PATH, $(go env GOPATH)/bin, `go install`, then the SDK's download.
 */
export async function findTemporalCli(configured: string | undefined, log: Logger): Promise<CliLocation> {
  if (configured) {
    if (!(await isExecutable(configured))) throw new Error(`TEMPORAL_CLI=${configured} is not an executable file`);
    return { path: configured, source: 'TEMPORAL_CLI' };
  }
  const fromPath = await onPath('temporal');
  if (fromPath) return { path: fromPath, source: 'PATH' };
  const bin = await goBinDir();
  if (bin) {
    const candidate = path.join(bin, 'temporal');
    if (await isExecutable(candidate)) return { path: candidate, source: 'GOPATH' };
    try {
      await goInstall(TEMPORAL_CLI_MODULE, log);
      if (await isExecutable(candidate)) return { path: candidate, source: 'go install' };
    } catch (error) {
      log.warn({ err: error }, 'go install of the Temporal CLI failed; falling back to the SDK download');
    }
  }
  return { path: undefined, source: 'sdk download' };
}

export interface DevServerOptions {
  cli: CliLocation;
  ip?: string;
  port: number;
  uiPort: number;
  headless: boolean;
  /** SQLite file; workflows survive a restart. Omit for an in-memory server. */
  dbFile?: string;
  /**
   * SQLite `synchronous` for the file, which runs in WAL mode: `full` syncs the log at every
   * commit (durable on power loss); `normal` syncs at checkpoints only (faster; a power loss can
   * lose the last commits, which are acks already given). See docs/performance.md.
   */
  sqliteSynchronous?: 'full' | 'normal';
  namespace: string;
  /** Registered with `--search-attribute`, so the Web UI can filter on them from the first start. */
  searchAttributes: readonly SearchAttributeKey[];
  /** `key=value` dynamic config (`--dynamic-config-value`), e.g. FAIRNESS_DYNAMIC_CONFIG. */
  dynamicConfig?: readonly string[];
  logFile: string;
  log: Logger;
}

export interface DevServer {
  address: string;
  uiUrl: string | undefined;
  adopted: boolean;
  pid: number | undefined;
  stop(): Promise<void>;
}

/** Whether a Temporal frontend answers at `address` (getSystemInfo within `timeoutMs`). */
export async function reachable(address: string, timeoutMs: number): Promise<boolean> {
  try {
    const connection = await Connection.connect({ address, connectTimeout: timeoutMs });
    try {
      await connection.workflowService.getSystemInfo({});
      return true;
    } finally {
      await connection.close();
    }
  } catch {
    return false;
  }
}

function searchAttributeArgs(keys: readonly SearchAttributeKey[]): string[] {
  // The CLI spells types as Keyword / Int.
  const cliType = (type: string) => type.charAt(0) + type.slice(1).toLowerCase();
  return keys.flatMap((key) => ['--search-attribute', `${key.name}=${cliType(key.type)}`]);
}

function dynamicConfigArgs(values: readonly string[]): string[] {
  return values.flatMap((value) => ['--dynamic-config-value', value]);
}

/**
 * WAL: a commit appends to the log instead of rewriting pages under a rollback journal, which
 * roughly doubles what the dev server takes per second on one disk.
 */
function sqlitePragmas(synchronous: 'full' | 'normal'): string[] {
  return ['--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', `synchronous=${synchronous}`];
}

export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const address = `${ip}:${options.port}`;
  const uiUrl = options.headless ? undefined : `http://${ip}:${options.uiPort}`;

  if (await reachable(address, 1000)) {
    options.log.info({ address }, 'a Temporal server is already listening there; reusing it');
    return { address, uiUrl, adopted: true, pid: undefined, stop: async () => undefined };
  }

  const args = [
    'server',
    'start-dev',
    '--ip',
    ip,
    '--port',
    String(options.port),
    '--namespace',
    options.namespace,
    '--log-format',
    'json',
    '--log-level',
    'warn',
    ...(options.headless ? ['--headless'] : ['--ui-port', String(options.uiPort)]),
    ...(options.dbFile ? ['--db-filename', options.dbFile, ...sqlitePragmas(options.sqliteSynchronous ?? 'full')] : []),
    ...searchAttributeArgs(options.searchAttributes),
    ...dynamicConfigArgs(options.dynamicConfig ?? []),
  ];
  if (options.dbFile) await fs.mkdir(path.dirname(options.dbFile), { recursive: true });
  await fs.mkdir(path.dirname(options.logFile), { recursive: true });

  if (!options.cli.path) return startWithSdkDownload(options, address, uiUrl);

  options.log.info({ cli: options.cli.path, source: options.cli.source, address, uiUrl }, 'starting Temporal dev server');
  const out = createWriteStream(options.logFile, { flags: 'a' });
  const child: ChildProcess = spawn(options.cli.path, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.pipe(out, { end: false });
  child.stderr!.pipe(out, { end: false });
  let exited: number | null | undefined;
  child.once('exit', (code) => {
    exited = code;
  });

  const deadline = Date.now() + 60_000;
  while (!(await reachable(address, 1000))) {
    if (exited !== undefined) throw new Error(`temporal exited with ${exited} during start-up; see ${options.logFile}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`Temporal dev server did not answer on ${address} within 60 s; see ${options.logFile}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }

  let stopped: Promise<void> | undefined;
  return {
    address,
    uiUrl,
    adopted: false,
    pid: child.pid,
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(force);
          out.end();
          resolve();
        });
        child.kill('SIGTERM');
      })),
  };
}

/** Last resort on machines with internet and no Go: the SDK downloads a CLI build itself. */
async function startWithSdkDownload(options: DevServerOptions, address: string, uiUrl: string | undefined): Promise<DevServer> {
  options.log.info({ address }, 'starting Temporal dev server from the SDK download');
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      ip: options.ip ?? '127.0.0.1',
      port: options.port,
      ...(options.headless ? {} : { ui: true, uiPort: options.uiPort }),
      dbFilename: options.dbFile,
      namespace: options.namespace,
      searchAttributes: [...options.searchAttributes],
      extraArgs: dynamicConfigArgs(options.dynamicConfig ?? []),
    },
  });
  return { address, uiUrl, adopted: false, pid: undefined, stop: () => env.teardown() };
}

export function devServerDbFile(dataDir: string): string {
  return path.join(dataDir, 'temporal', 'temporal.db');
}
