/**
 * `npm run conformance [-- <extra schemathesis options>]`: the server against its own OpenAPI
 * document. It brings up the real stack (embedded Postgres and Temporal, a worker and an API as
 * separate processes, all on free 127.0.0.1 ports), seeds an organization with an owner API key
 * and a configured GitHub webhook secret, then runs schemathesis with every check and every
 * phase over `/openapi.json`. The exit code is schemathesis's: non-zero on any failure.
 *
 * Schemathesis is pinned and lives in `.venv-conformance/` (gitignored), created here on a
 * clean clone; pip runs only when the pinned version is not the one installed.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createTestOrg } from '../harness/identity';
import { outsideEnv } from '../harness/process';
import { startBenchStack } from '../../bench/lib/stack';
import { exitWith } from '../../bench/lib/exit';

const SCHEMATHESIS_VERSION = '4.32.5';
const root = path.resolve(__dirname, '../..');
const venv = path.join(root, '.venv-conformance');
const schemathesis = path.join(venv, 'bin', 'schemathesis');
/** Outlives the run's data directory, which stop() removes. */
const reportDir = path.join(root, '.data', 'conformance');

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.status ?? result.signal}`);
}

function installedVersion(): string | undefined {
  if (!fs.existsSync(schemathesis)) return undefined;
  const result = spawnSync(schemathesis, ['--version'], { encoding: 'utf8' });
  return /version\s+(\S+)/.exec(result.stdout ?? '')?.[1];
}

/** Creates or refreshes the virtual environment; a no-op when the pinned version is there. */
function ensureSchemathesis(): void {
  if (installedVersion() === SCHEMATHESIS_VERSION) return;
  if (!fs.existsSync(path.join(venv, 'bin', 'python'))) {
    console.log(`creating ${path.relative(root, venv)}/ …`);
    run('python3', ['-m', 'venv', venv]);
  }
  console.log(`installing schemathesis==${SCHEMATHESIS_VERSION} …`);
  run(path.join(venv, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', `schemathesis==${SCHEMATHESIS_VERSION}`]);
  const version = installedVersion();
  if (version !== SCHEMATHESIS_VERSION) throw new Error(`schemathesis ${version ?? 'missing'} after install, wanted ${SCHEMATHESIS_VERSION}`);
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

async function main(): Promise<number> {
  ensureSchemathesis();
  const started = Date.now();
  // Ctrl-C stops schemathesis (or skips it), and the stack is then stopped below: nothing the
  // run started outlives it.
  let interrupted = false;
  let child: ReturnType<typeof spawn> | undefined;
  const interrupt = () => {
    interrupted = true;
    child?.kill('SIGTERM');
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  const stack = await startBenchStack();
  try {
    if (interrupted) return 130;
    const org = await createTestOrg(stack.database.db);
    const session = await org.session(org.owner.memberId);
    const url = stack.api.url!;
    console.log(`stack up in ${((Date.now() - started) / 1000).toFixed(1)} s at ${url}`);
    const configFile = path.join(stack.dataDir, 'schemathesis.toml');
    fs.writeFileSync(configFile, schemathesisConfig({ session: session.token, apiKey: org.owner.apiKey }));
    const args = [
      '--config-file', configFile,
      'run',
      `${url}/openapi.json`,
      '--checks', 'all',
      '--phases', 'examples,coverage,fuzzing,stateful',
      // Bounded so the whole run takes a few minutes on two cores; a fixed seed, so CI is
      // reproducible (pass `-- --seed N` to explore other inputs).
      '--max-examples', '50',
      '--seed', '1',
      // No example database in the working tree: the seed alone decides what is sent.
      '--generation-database', 'none',
      // One worker: Python 3.11's ast.parse is not thread-safe, and hypothesis calls it while
      // generating ("AST constructor recursion depth mismatch" with several workers).
      '--workers', '1',
      '--request-timeout', '40',
      '--no-color',
      '--report', 'junit',
      '--report-dir', reportDir,
      ...process.argv.slice(2),
    ];
    child = spawn(schemathesis, args, {
      cwd: root,
      stdio: 'inherit',
      // No proxy variables: its one destination is the API on 127.0.0.1.
      env: { ...outsideEnv(), NO_COLOR: '1' } as NodeJS.ProcessEnv,
    });
    const code = await new Promise<number>((resolve) => child!.once('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
    const crashed = !stack.api.alive() || /unhandled|uncaught/i.test(stack.api.output);
    if (crashed) console.error(`the API crashed or logged an unhandled error:\n${stack.api.output.slice(-4000)}`);
    console.log(`conformance: schemathesis exited ${code} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return code !== 0 ? code : crashed ? 1 : 0;
  } finally {
    process.off('SIGINT', interrupt);
    process.off('SIGTERM', interrupt);
    await stack.stop();
  }
}

exitWith(main());
