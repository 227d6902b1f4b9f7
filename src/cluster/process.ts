/**
 * One program of the cluster: a child process whose output goes to its own log file, that can
 * be waited on and stopped. Children run in their own process group (`detached`), so a Ctrl-C
 * in the terminal reaches only the launcher, which then stops them in order (API replicas
 * before workers before Temporal before Postgres) instead of all at once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/** Every program the launcher started that still runs, for a forced exit (a second Ctrl-C). */
const live = new Set<number>();

/** Adds a process to those a forced exit kills; the returned function takes it off once it has exited. */
export function trackForForcedExit(pid: number): () => void {
  live.add(pid);
  return () => live.delete(pid);
}

/** SIGKILL to everything still running: nothing the launcher started may outlive it. */
export function killAll(): void {
  for (const pid of live) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  live.clear();
}

export interface ManagedProcess {
  name: string;
  pid: number;
  logFile: string;
  /** Resolves with the exit code (or signal) once the process has ended, for whatever reason. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

export async function startProcess(options: {
  name: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  logFile: string;
  /** The signal that asks it to stop cleanly (Postgres: SIGINT, its "fast shutdown"). */
  stopSignal?: NodeJS.Signals;
}): Promise<ManagedProcess> {
  await fs.mkdir(path.dirname(options.logFile), { recursive: true });
  const out = createWriteStream(options.logFile, { flags: 'a' });
  const child: ChildProcess = spawn(options.command, options.args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  child.stdout!.pipe(out, { end: false });
  child.stderr!.pipe(out, { end: false });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      out.end();
      resolve({ code, signal });
    });
    child.once('error', () => resolve({ code: -1, signal: null }));
  });
  if (child.pid === undefined) {
    const result = await exited;
    throw new Error(`${options.name} did not start (${options.command}: exit ${result.code}); see ${options.logFile}`);
  }
  void exited.then(trackForForcedExit(child.pid));
  let stopping: Promise<void> | undefined;
  return {
    name: options.name,
    pid: child.pid,
    logFile: options.logFile,
    exited,
    stop: (graceMs = 15_000) =>
      (stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
        child.kill(options.stopSignal ?? 'SIGTERM');
        await exited;
        clearTimeout(force);
      })()),
  };
}

/** Polls `probe` until it answers true, the process exits, or the deadline passes. */
export async function waitUntil(
  what: string,
  probe: () => Promise<boolean>,
  options: { process?: ManagedProcess; timeoutMs: number },
): Promise<void> {
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void options.process?.exited.then((result) => (exited = result));
  const deadline = Date.now() + options.timeoutMs;
  while (!(await probe())) {
    if (exited) {
      throw new Error(`${options.process!.name} exited (${exited.signal ?? exited.code}) before ${what}; see ${options.process!.logFile}`);
    }
    if (Date.now() > deadline) {
      throw new Error(`${what}: not within ${options.timeoutMs / 1000} s${options.process ? `; see ${options.process.logFile}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
