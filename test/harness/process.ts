import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { denBin } from './den-bin';
import { waitFor } from './wait';

const root = path.resolve(__dirname, '../..');

export interface Spawned {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Stops runtimes a test started (Ctrl-C, as an operator would) and waits until each has exited. */
export async function stopRuntimes(runtimes: Spawned[]): Promise<void> {
  for (const runtime of runtimes) runtime.child.kill('SIGINT');
  await Promise.all(runtimes.map((runtime) => runtime.exited));
}

/** Runs one of the service's entry points as a real process (TypeScript through tsx). */
export function spawnEntry(entry: string, env: Record<string, string | undefined>): Spawned {
  return spawnNode(['--require', 'tsx/cjs', path.join(root, entry)], env);
}

/**
 * Runs compiled JavaScript outside the repository, resolving packages from its node_modules,
 * with `preload` (a --require hook) loaded first.
 */
export function spawnCompiled(file: string, env: Record<string, string | undefined>, preload: string): Spawned {
  return spawnNode(['--require', preload, file], { ...env, NODE_PATH: path.join(root, 'node_modules') });
}

/** Runs an entry point through tsx's ESM loader, as `npm run cluster` does, in a process group of its own. */
export function spawnImportEntry(entry: string, env: Record<string, string | undefined>): Spawned {
  return spawnNode(['--import', 'tsx', path.join(root, entry)], env, { detached: true });
}

/** Runs the `den` CLI as a real process (test/harness/den-bin.ts says which file). */
export function spawnDen(args: string[], env: Record<string, string | undefined>): Spawned {
  return spawnNode([denBin(), ...args], env);
}

/**
 * `den runtime --exec "sh <script>"` for one member, a real child process on short test intervals
 * (2 s claim wait, 1 s heartbeats unless `heartbeatSeconds` says otherwise, 5 s grace, output
 * reported every 100 ms), resolved once it claims runs. The script is written to `dir`; the
 * process goes into `spawned` at once, so the caller stops it even if it never started.
 */
export async function startScriptRuntime(
  target: { url: string; apiKey: string; heartbeatSeconds?: number },
  script: { dir: string; name: string; text: string },
  spawned: Spawned[],
): Promise<Spawned> {
  const file = path.join(script.dir, `${script.name}.sh`);
  fs.writeFileSync(file, script.text);
  const proc = spawnDen(
    ['runtime', '--exec', `sh ${file}`, '--wait', '2', '--heartbeat-interval', String(target.heartbeatSeconds ?? 1), '--grace', '5'],
    {
      DEN_API_KEY: target.apiKey,
      DEN_API_URL: target.url,
      DEN_RUNTIME_STREAM_INTERVAL: '100ms',
    },
  );
  spawned.push(proc);
  await waitFor(() => proc.output().includes('claiming runs from'), 90_000, { what: 'den runtime to start' });
  return proc;
}

/**
 * Only what a child process needs from the outside; everything else is the caller's config.
 * The Go variables let the cluster launcher find (or build) Temporal's programs as `npm run
 * cluster` would.
 */
export function outsideEnv(): Record<string, string | undefined> {
  const go = Object.fromEntries(Object.entries(process.env).filter(([name]) => /^GO[A-Z]+$/.test(name)));
  return { PATH: process.env.PATH, HOME: process.env.HOME, ...go };
}

function spawnNode(args: string[], env: Record<string, string | undefined>, options: { detached?: boolean } = {}): Spawned {
  const child = spawn(process.execPath, args, {
    cwd: root,
    detached: options.detached ?? false,
    env: { ...outsideEnv(), ...env } as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => output, exited };
}

/** Whether a process is gone (a zombie waiting for its parent counts as gone: it runs nothing). */
export function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return true; // Reaped between the two looks.
  }
  return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
}
