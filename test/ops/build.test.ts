/**
 * Production runs compiled code with production dependencies only: the service is compiled
 * with tsconfig.build.json (as `npm run build` does), then the compiled API and worker run as
 * real processes under a loader hook that refuses every devDependency (tsx, @temporalio/testing,
 * the embedded Postgres…). They must still serve requests and run a workflow end to end.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/main/config';
import { createTemporalClient } from '../../src/app/temporal/client';
import { pingWorkflowId } from '../../src/app/temporal/contract';
import { ping } from '../../workflows/ping';
import { freePort } from '../harness/ports';
import { spawnCompiled, type Spawned } from '../harness/process';
import { waitFor } from '../harness/wait';

const root = path.resolve(__dirname, '../..');

let outDir: string;
let guard: string;
const procs: Spawned[] = [];

beforeAll(async () => {
  const pkg = JSON.parse(await fs.readFile(path.join(root, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  outDir = await fs.mkdtemp(path.join(os.tmpdir(), 'den-build-'));
  await promisify(execFile)(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', outDir], {
    cwd: root,
  });
  // Throws on any devDependency, at the moment something requires it.
  guard = path.join(outDir, 'refuse-dev-dependencies.js');
  await fs.writeFile(
    guard,
    `const Module = require('node:module');
const dev = new Set(${JSON.stringify(Object.keys(pkg.devDependencies))});
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  const name = request.startsWith('@') ? request.split('/').slice(0, 2).join('/') : request.split('/')[0];
  if (dev.has(name)) throw new Error('production code required the devDependency ' + name);
  return resolve.call(this, request, ...rest);
};
`,
  );
}, 120_000);

afterAll(async () => {
  for (const proc of procs) {
    if (proc.child.exitCode === null) proc.child.kill('SIGTERM');
    await proc.exited;
  }
  await fs.rm(outDir, { recursive: true, force: true });
});

it('serves and runs workflows from compiled JavaScript without any devDependency', async () => {
  const config = loadConfig();
  const port = await freePort();
  const taskQueue = `build-${randomUUID()}`;
  const env = {
    NODE_ENV: 'production',
    DATABASE_URL: config.database.url,
    TEMPORAL_ADDRESS: config.temporal.address,
    SECRET_KEY: config.secretKey,
    TEMPORAL_TASK_QUEUE: taskQueue,
    WORKFLOW_BUNDLE_PATH: config.temporal.workflowBundlePath,
    APP_BASE_URL: 'https://den.example',
    PORT: String(port),
    LOG_LEVEL: 'warn',
  };
  const api = spawnCompiled(path.join(outDir, 'src/bin/serve.js'), env, guard);
  const worker = spawnCompiled(path.join(outDir, 'src/bin/worker.js'), env, guard);
  procs.push(api, worker);

  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, 30_000, { intervalMs: 200 }).catch(
    (error: unknown) => {
      throw new Error(`compiled API not ready: ${String(error)}\n${api.output()}`);
    },
  );
  const document = (await (await fetch(`${url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
  expect(document.paths).toHaveProperty(['/v1/automation-runs/{id}/events']);
  expect((await fetch(`${url}/v1/me`)).status).toBe(401);

  const temporal = createTemporalClient({ address: config.temporal.address!, namespace: config.temporal.namespace, taskQueue });
  try {
    const result = await temporal.client.workflow.execute(ping, {
      taskQueue,
      workflowId: pingWorkflowId(randomUUID()),
      args: ['compiled'],
      workflowExecutionTimeout: '30s',
    });
    expect(result.text).toBe('compiled');
  } finally {
    await temporal.close();
  }
  expect(api.output()).not.toContain('devDependency');
  expect(worker.output()).not.toContain('devDependency');
}, 90_000);
