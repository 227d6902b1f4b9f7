/**
 * The server against its own OpenAPI document, checked by schemathesis. It brings up the real
 * stack (embedded Postgres and Temporal, a worker and an API as separate processes, all on free
 * 127.0.0.1 ports), seeds an organization with an owner API key and a configured GitHub webhook
 * secret, then runs schemathesis with every check and every phase over `/openapi.json`.
 *
 * Used by `npm run conformance` (output on the terminal) and by `test/conformance/` in `npm test`
 * (output in a log file, the verdict as Jest assertions).
 *
 * Schemathesis is pinned and lives in `.venv-conformance/` (gitignored), created here on a clean
 * clone; pip runs only when the pinned version is not the one installed.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createTestOrg } from '../harness/identity';
import { outsideEnv } from '../harness/process';
import { startBenchStack } from '../../bench/lib/stack';

const SCHEMATHESIS_VERSION = '4.32.5';
const root = path.resolve(__dirname, '../..');
const venv = path.join(root, '.venv-conformance');
const schemathesis = path.join(venv, 'bin', 'schemathesis');
/** Outlives the run's data directory, which stop() removes. */
export const reportDir = path.join(root, '.data', 'conformance');

function run(command: string, args: string[], log: (line: string) => void): void {
  const result = spawnSync(command, args, { cwd: root, encoding: 'utf8' });
  if (result.stdout) log(result.stdout.trimEnd());
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.status ?? result.signal}: ${result.stderr}`);
}

function installedVersion(): string | undefined {
  if (!fs.existsSync(schemathesis)) return undefined;
  const result = spawnSync(schemathesis, ['--version'], { encoding: 'utf8' });
  return /version\s+(\S+)/.exec(result.stdout ?? '')?.[1];
}

/** Creates or refreshes the virtual environment; a no-op when the pinned version is there. */
function ensureSchemathesis(log: (line: string) => void): void {
  if (installedVersion() === SCHEMATHESIS_VERSION) return;
  if (!fs.existsSync(path.join(venv, 'bin', 'python'))) {
    log(`creating ${path.relative(root, venv)}/ …`);
    run('python3', ['-m', 'venv', venv], log);
  }
  log(`installing schemathesis==${SCHEMATHESIS_VERSION} …`);
  run(path.join(venv, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', `schemathesis==${SCHEMATHESIS_VERSION}`], log);
  const version = installedVersion();
  if (version !== SCHEMATHESIS_VERSION)
    throw new Error(`schemathesis ${version ?? 'missing'} after install, wanted ${SCHEMATHESIS_VERSION}`);
}

/**
 * Credentials per security scheme of the document, not one header on every request: a
 * session-only route then gets the session alone, and the auth checks take away exactly the
 * scheme the route declares.
 */
function schemathesisConfig(seed: { session: string; apiKey: string }): string {
  const toml = (value: string) => JSON.stringify(value);
  return [
    '[auth.openapi.bearerAuth]',
    `bearer = ${toml(seed.session)}`,
    '',
    '[auth.openapi.denApiKey]',
    `api_key = ${toml(seed.apiKey)}`,
    '',
    // The claim long-poll waits up to waitSeconds (≤ 30) when nothing is queued, which is every
    // time here, so its answer may take that long. Generated bodies wait 1 s (still the waiting
    // path, and the run stays within minutes); the coverage phase still sends the bounds 0 and 30.
    '[[operations]]',
    'include-path = "/v1/automation-runs/claim"',
    'parameters = { "body.waitSeconds" = 1 }',
    'checks = { max_response_time = 35 }',
    '',
  ].join('\n');
}

export interface ConformanceRun {
  /** schemathesis's exit code (130 when interrupted before it started). */
  code: number;
  /** The API process died or logged an unhandled error during the run. */
  crashed: boolean;
  /** The tail of the API's output when it crashed. */
  apiOutput: string;
  seconds: number;
}

export interface ConformanceOptions {
  /** Where schemathesis writes: the terminal, or a file descriptor. */
  output: 'inherit' | number;
  log: (line: string) => void;
  /** More schemathesis options, after the project's own. */
  extraArgs?: string[];
  /** Set when the caller is interrupted (Ctrl-C): schemathesis is stopped, or never started. */
  signal?: AbortSignal;
}

export async function runConformance(options: ConformanceOptions): Promise<ConformanceRun> {
  ensureSchemathesis(options.log);
  const started = Date.now();
  const seconds = () => (Date.now() - started) / 1000;
  let child: ChildProcess | undefined;
  const interrupt = () => child?.kill('SIGTERM');
  options.signal?.addEventListener('abort', interrupt);
  const stack = await startBenchStack();
  try {
    if (options.signal?.aborted) return { code: 130, crashed: false, apiOutput: '', seconds: seconds() };
    const org = await createTestOrg(stack.database.db);
    const session = await org.session(org.owner.memberId);
    const url = stack.api.url!;
    options.log(`stack up in ${seconds().toFixed(1)} s at ${url}`);
    const configFile = path.join(stack.dataDir, 'schemathesis.toml');
    fs.writeFileSync(configFile, schemathesisConfig({ session: session.token, apiKey: org.owner.apiKey }));
    const args = [
      '--config-file',
      configFile,
      'run',
      `${url}/openapi.json`,
      '--checks',
      'all',
      '--phases',
      'examples,coverage,fuzzing,stateful',
      // Bounded so the whole run takes a few minutes on two cores; a fixed seed, so CI is
      // reproducible (pass `-- --seed N` to explore other inputs).
      '--max-examples',
      '50',
      '--seed',
      '1',
      // No example database in the working tree: the seed alone decides what is sent.
      '--generation-database',
      'none',
      // One worker: Python 3.11's ast.parse is not thread-safe, and hypothesis calls it while
      // generating ("AST constructor recursion depth mismatch" with several workers).
      '--workers',
      '1',
      '--request-timeout',
      '40',
      '--no-color',
      ...(options.extraArgs ?? []),
    ];
    child = spawn(schemathesis, args, {
      cwd: root,
      stdio: ['ignore', options.output, options.output],
      // No proxy variables: its one destination is the API on 127.0.0.1.
      env: { ...outsideEnv(), NO_COLOR: '1' } as NodeJS.ProcessEnv,
    });
    const code = await new Promise<number>((resolve) => child!.once('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
    const crashed = !stack.api.alive() || /unhandled|uncaught/i.test(stack.api.output);
    return { code, crashed, apiOutput: crashed ? stack.api.output.slice(-4000) : '', seconds: seconds() };
  } finally {
    options.signal?.removeEventListener('abort', interrupt);
    await stack.stop();
  }
}

/** "Test cases: N generated, N passed, …" from schemathesis's summary, or undefined. */
export function testCaseCounts(output: string): { generated: number; passed: number; failed: number } | undefined {
  const line = /(\d+) generated, ([^\n]*)/.exec(output);
  if (!line) return undefined;
  const count = (word: string) => Number(new RegExp(`(\\d+) ${word}`).exec(line[2]!)?.[1] ?? 0);
  return { generated: Number(line[1]), passed: count('passed'), failed: count('failed') };
}
