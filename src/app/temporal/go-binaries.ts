/**
 * Temporal's own programs (the CLI with its dev server, the production server, its SQL schema
 * tool and the Web UI server) are built here from the Go module proxy with `go install`, once
 * per machine, into $(go env GOPATH)/bin, which outlives clones. No Docker on these machines.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { childEnvironment } from '../config';
import type { Logger } from '../log';

const exec = promisify(execFile);

export async function isExecutable(file: string): Promise<boolean> {
  try {
    await fs.access(file, fs.constants.X_OK);
    return (await fs.stat(file)).isFile();
  } catch {
    return false;
  }
}

export async function onPath(name: string): Promise<string | undefined> {
  try {
    const { stdout } = await exec('sh', ['-c', `command -v ${name}`], { timeout: 5000 });
    const found = stdout.trim();
    return found && (await isExecutable(found)) ? found : undefined;
  } catch {
    return undefined;
  }
}

export async function goBinDir(): Promise<string | undefined> {
  try {
    const { stdout } = await exec('go', ['env', 'GOPATH'], { timeout: 30_000 });
    const gopath = stdout.trim().split(path.delimiter)[0];
    return gopath ? path.join(gopath, 'bin') : undefined;
  } catch {
    return undefined;
  }
}

/** `go install module@version`, into `gobin` when given (two modules both name their binary `server`). */
export async function goInstall(module: string, log: Logger, gobin?: string): Promise<void> {
  log.info({ module }, 'building with go install (once per machine; minutes)');
  await exec('go', ['install', module], {
    timeout: 30 * 60_000,
    maxBuffer: 64 * 1024 * 1024,
    ...(gobin ? { env: childEnvironment({ GOBIN: gobin }) } : {}),
  });
}

/**
 * The executable `name` built from `module`: `configured` when set (it must exist), else
 * `<gobin>/<name>`, built with go install when missing. `subdir` under GOPATH/bin keeps two
 * modules that both name their program `server` apart.
 */
export async function findOrInstall(options: {
  configured: string | undefined;
  configuredBy: string;
  name: string;
  module: string;
  subdir?: string;
  log: Logger;
}): Promise<string> {
  if (options.configured) {
    if (!(await isExecutable(options.configured)))
      throw new Error(`${options.configuredBy}=${options.configured} is not an executable file`);
    return options.configured;
  }
  const bin = await goBinDir();
  if (!bin) throw new Error(`Go is not installed: set ${options.configuredBy}, or install Go to build ${options.module}`);
  const dir = options.subdir ? path.join(bin, options.subdir) : bin;
  const candidate = path.join(dir, options.name);
  if (await isExecutable(candidate)) return candidate;
  await goInstall(options.module, options.log, options.subdir ? dir : undefined);
  if (!(await isExecutable(candidate))) throw new Error(`go install ${options.module} did not produce ${candidate}`);
  return candidate;
}
