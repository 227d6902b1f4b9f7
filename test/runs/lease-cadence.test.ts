/**
 * A runtime that heartbeats every third of its lease keeps it, over the real stack on the
 * production coalescing default (RUN_HEARTBEAT_COALESCE_FRACTION 0.7): runs beating every second
 * against a 3 s lease over HTTP, `den runtime --heartbeat-interval 1` as child processes, and
 * 20 s against 60 s scaled down ten times (2 s against 6 s). No heartbeat is answered
 * `leaseValid:false`, no event `stale_attempt`, and every run ends in its first attempt.
 *
 * A heartbeat may be answered 503: the service says so when it cannot land the heartbeat in the
 * run's history before the lease it extends runs out (src/runs/report.ts, heartbeatBudget), which
 * a machine running the whole suite on two cores can make happen with a 3 s lease. A 503 is an
 * honest answer the runtime carries on from; what must never happen is the lease lost.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestOrg, type TestMember } from '../harness/identity';
import { startScriptRuntime, stopRuntimes, type Spawned } from '../harness/process';
import { event, newRunId, runResult, runsClient, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

let dir: string;
const runtimes: Spawned[] = [];
let stack: TestStack;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-lease-cadence-'));
});
afterEach(async () => {
  await stopRuntimes(runtimes.splice(0));
  await stack?.stop();
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The shared stack, on the production coalescing default, with a short lease. */
const startStack = (leaseTimeout: string) => startTestStack({ worker: true, env: { RUN_LEASE_TIMEOUT: leaseTimeout } });

/**
 * Starts a run by its first event as a well-behaved client does: a 429 (admission on a machine
 * the rest of the suite keeps busy) is asked again after its Retry-After, a bounded number of times.
 */
async function startRun(runs: ReturnType<typeof runsClient>, id: string) {
  for (let tries = 1; ; tries++) {
    const reply = await runs.postEvent(id, event(1, 1, 'user', { text: 'go' }));
    if (reply.status !== 429 || tries === 5) return expect({ id, status: reply.status, body: reply.json }).toMatchObject({ status: 200 });
    await sleep(Number(reply.headers.get('retry-after') ?? 1) * 1000);
  }
}

/** One run started by its first event, then a heartbeat every second for `beats` seconds, on its own clock as a runtime's timer would. */
async function beatEverySecond(runs: ReturnType<typeof runsClient>, id: string, beats: number) {
  await startRun(runs, id);
  const start = Date.now();
  const answers: { status: number; leaseValid?: boolean; error?: string }[] = [];
  for (let beat = 1; beat <= beats; beat++) {
    await sleep(start + beat * 1_000 - Date.now());
    const reply = await runs.heartbeat(id, 1);
    answers.push({ status: reply.status, leaseValid: reply.json?.leaseValid, error: reply.json?.error });
  }
  // Closed while its lease holds, right after its last beat, as a runtime does.
  const closing = await runs.postEvent(id, event(1, 2, 'terminal', { status: 'succeeded' }));
  return { answers, closing: { id, status: closing.status, body: closing.json } };
}

it('ten runs beating every second for 12 s against a 3 s lease keep it, and each closes in its first attempt', async () => {
  stack = await startStack('3s');
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const ids = Array.from({ length: 10 }, newRunId);
  const outcomes = await Promise.all(ids.map((id) => beatEverySecond(runs, id, 12)));
  const answers = outcomes.flatMap((o) => o.answers);
  expect(answers).toHaveLength(120);
  expect(answers.filter((a) => (a.status !== 200 && a.status !== 503) || (a.status === 200 && a.leaseValid !== true))).toEqual([]);
  expect(outcomes.map((o) => o.closing)).toEqual(ids.map((id) => ({ id, status: 200, body: expect.anything() })));
  for (const id of ids) expect(await runResult(stack, org.organizationId, id)).toMatchObject({ status: 'succeeded', attempt: 1 });
}, 90_000);

/**
 * `runs` queued runs whose command takes `commandSeconds`, claimed by `processes` den runtimes
 * beating every `heartbeatSeconds`: each must succeed in its first attempt, and no runtime may
 * have heard its lease lost or an attempt called stale (a heartbeat answered 503 it carries on from).
 */
async function runWithDenRuntime(options: { runs: number; processes: number; commandSeconds: number; heartbeatSeconds: number }) {
  const org = await createTestOrg(stack.services.database.db);
  const member: TestMember = await org.addMember('member');
  const queued = [];
  for (let i = 0; i < options.runs; i++)
    queued.push(await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId }));
  const script = `cat > /dev/null; sleep ${options.commandSeconds}; echo done`;
  const started = [];
  for (let i = 0; i < options.processes; i++) {
    const target = { url: stack.url, apiKey: member.apiKey, heartbeatSeconds: options.heartbeatSeconds };
    started.push(startScriptRuntime(target, { dir, name: `${member.memberId}-${i}`, text: script }, runtimes));
  }
  await Promise.all(started);
  const rounds = Math.ceil(options.runs / options.processes);
  const timeoutMs = (rounds * (options.commandSeconds + 5) + 30) * 1000;
  const results = await Promise.all(queued.map(({ runId }) => runResult(stack, org.organizationId, runId, timeoutMs)));
  expect(results.map((r) => ({ status: r.status, attempt: r.attempt, error: r.error }))).toEqual(
    results.map(() => ({ status: 'succeeded', attempt: 1, error: null })),
  );
  const output = runtimes.map((r) => r.output()).join('\n');
  expect(output).not.toMatch(/heartbeat refused|stale_attempt|lease/);
  expect(output.match(/heartbeat failed \((?!heartbeat answered 503\)).*/g) ?? []).toEqual([]);
}

it('20 runs of 15 s each under den runtime --heartbeat-interval 1 against a 3 s lease succeed, each in one attempt', async () => {
  stack = await startStack('3s');
  await runWithDenRuntime({ runs: 20, processes: 5, commandSeconds: 15, heartbeatSeconds: 1 });
}, 240_000);

it('20 s against 60 s, ten times faster (den runtime --heartbeat-interval 2 against a 6 s lease), keeps the lease', async () => {
  stack = await startStack('6s');
  await runWithDenRuntime({ runs: 2, processes: 2, commandSeconds: 20, heartbeatSeconds: 2 });
}, 120_000);
