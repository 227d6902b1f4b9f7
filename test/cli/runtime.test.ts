/**
 * `den runtime` as a real child process against the real stack: it reports the command's output
 * as it grows (an `assistant` event at most once a second, the whole output last), stops a
 * cancelled run's command (SIGTERM, then SIGKILL after DEN_RUNTIME_KILL_GRACE) and reports it
 * `cancelled`, goes on claiming, and waits out a 429's Retry-After.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startHttpProxy } from '../harness/http-proxy';
import { createTestOrg, type TestMember } from '../harness/identity';
import { gone, spawnDen } from '../harness/process';
import { runResult, runsClient, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let stack: TestStack;
let dir: string;
beforeAll(async () => {
  stack = await startTestStack({ worker: true });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-runtime-'));
});
afterAll(async () => {
  await stack.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const KILL_GRACE_MS = 2_000;
const HEARTBEAT_MS = 1_000;

function startRuntime(member: TestMember, exec: string, apiUrl = stack.url) {
  const proc = spawnDen(['runtime', '--exec', exec, '--wait', '2', '--heartbeat-interval', String(HEARTBEAT_MS / 1000), '--grace', '5'], {
    DEN_API_KEY: member.apiKey,
    DEN_API_URL: apiUrl,
    DEN_RUNTIME_KILL_GRACE: `${KILL_GRACE_MS}ms`,
  });
  return {
    output: proc.output,
    /** Resolves once it polls for runs (tsx compiles the CLI first, which a loaded machine makes slow). */
    ready: () => waitFor(() => proc.output().includes('claiming runs from'), 60_000, { what: 'den runtime to start' }),
    /** Ctrl-C; the exit, with the runtime's output when it did not exit 0 (so a failure shows why). */
    async stop() {
      proc.child.kill('SIGINT');
      const { code, signal } = await proc.exited;
      return code === 0 ? 0 : { code, signal, output: proc.output() };
    },
  };
}

async function memberOf() {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  return { org, member, runs: runsClient(stack, member.headers) };
}

interface StoredEvent {
  sequence: number;
  type: string;
  payload: { text?: string; status?: string };
  createdAt: number;
}

it('reports the output as it grows, at most once a second, and the whole output last', async () => {
  const { org, member, runs } = await memberOf();
  const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId });
  const runtime = startRuntime(member, 'echo one; sleep 1; echo two; sleep 1; echo three');
  let exit;
  try {
    await runtime.ready();
    expect(await runResult(stack, org.organizationId, runId, 30_000)).toMatchObject({ status: 'succeeded' });
  } finally {
    exit = await runtime.stop();
  }
  // Ctrl-C: stops claiming and exits 0 (checked after the body, so a failure there shows first).
  expect(exit).toBe(0);
  const events = (await runs.events(runId)).json.events as StoredEvent[];
  expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
  expect(events.at(-1)).toMatchObject({ type: 'terminal', payload: { status: 'succeeded' } });
  const answers = events.filter((e) => e.type === 'assistant');
  const texts = answers.map((e) => e.payload.text!);
  expect(texts.at(-1)).toBe('one\ntwo\nthree\n');
  // The answer grew: at least one report before the whole output, each a longer prefix of the next.
  expect(texts.length).toBeGreaterThanOrEqual(2);
  for (let i = 1; i < texts.length; i++) {
    expect(texts[i]!.startsWith(texts[i - 1]!)).toBe(true);
    expect(texts[i]!.length).toBeGreaterThan(texts[i - 1]!.length);
  }
  // The progress reports (all but the last, sent at exit) were made at least about a second apart.
  const progress = answers.slice(0, -1).map((e) => e.createdAt);
  for (let i = 1; i < progress.length; i++) expect(progress[i]! - progress[i - 1]!).toBeGreaterThanOrEqual(900);
}, 60_000);

it('stops a cancelled run’s command within the grace, reports it cancelled, and goes on claiming', async () => {
  const { org, member, runs } = await memberOf();
  const pidFile = path.join(dir, 'sleep.pid');
  // A command that leaves a child of its own: the stop must reach the whole process group.
  const exec = `if [ "$(cat)" = sleep ]; then sleep 60 & echo $! > ${pidFile}; echo started; wait; else echo quick; fi`;
  const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId, text: 'sleep' });
  const runtime = startRuntime(member, exec);
  let exit;
  try {
    await runtime.ready();
    await runs.waitForStatus(runId, ['running'], 30_000);
    const pid = Number(await waitFor(() => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').trim(), 10_000));
    expect(gone(pid)).toBe(false);

    const asked = Date.now();
    const cancel = await stack.request('POST', `/v1/automation-runs/${runId}/cancel`, {
      headers: member.headers,
      body: { reason: 'too slow' },
    });
    expect(cancel).toMatchObject({ status: 202, json: { status: 'running', cancelRequested: true } });
    // The next heartbeat (one interval) says so, then SIGTERM; SIGKILL would follow the grace.
    await waitFor(() => gone(pid), HEARTBEAT_MS + KILL_GRACE_MS + 1_500, { what: 'the command to be gone' });
    expect(Date.now() - asked).toBeLessThan(HEARTBEAT_MS + KILL_GRACE_MS + 1_500);
    expect(await runResult(stack, org.organizationId, runId, 15_000)).toMatchObject({ status: 'cancelled', error: 'too slow' });
    const events = (await runs.events(runId)).json.events as StoredEvent[];
    expect(events.at(-1)).toMatchObject({ type: 'terminal', payload: { status: 'cancelled' } });

    // Still claiming: the next run is answered.
    const next = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId, text: 'quick' });
    expect(await runResult(stack, org.organizationId, next.runId, 20_000)).toMatchObject({
      status: 'succeeded',
      lastAssistantText: 'quick\n',
    });
  } finally {
    exit = await runtime.stop();
  }
  // Ctrl-C: stops claiming and exits 0 (checked after the body, so a failure there shows first).
  expect(exit).toBe(0);
  expect(runtime.output()).toContain(`run ${runId}: cancel requested`);
}, 60_000);

it('waits out a 429 for its Retry-After, then claims', async () => {
  const { org, member } = await memberOf();
  let refused = 0;
  let refusedAt = 0;
  let claimedAt = 0;
  const proxy = await startHttpProxy(stack.url, (method, url) => {
    if (method !== 'POST' || url !== '/v1/automation-runs/claim') return undefined;
    if (refused === 0) {
      refused += 1;
      refusedAt = Date.now();
      return { status: 429, headers: { 'retry-after': '2' }, body: { error: 'rate_limited' } };
    }
    claimedAt ||= Date.now();
    return undefined;
  });
  const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId, text: 'hi' });
  const runtime = startRuntime(member, 'cat', proxy.url);
  let exit;
  try {
    await runtime.ready();
    expect(await runResult(stack, org.organizationId, runId, 20_000)).toMatchObject({ status: 'succeeded', lastAssistantText: 'hi' });
  } finally {
    exit = await runtime.stop();
    await proxy.close();
  }
  expect(exit).toBe(0);
  expect(refused).toBe(1);
  expect(claimedAt - refusedAt).toBeGreaterThanOrEqual(1_900);
  expect(runtime.output()).toContain('the API asked to slow down (429); retrying in 2000 ms');
}, 60_000);
