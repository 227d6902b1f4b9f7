/**
 * Runtimes people can trust, over the real stack with `den runtime` as a child process:
 * - an admin's runner token claims, reports and completes a run, opens nothing else (403), and
 *   stops at once when its runner is deleted (401; the runtime exits saying why);
 * - neither the API key nor the token reaches the command's environment or the runtime's log;
 * - the runners list shows a runtime online, and offline within the presence window once it stops;
 *   presence is written a few times a window, not once per heartbeat;
 * - runs whose command crashes open the member's breaker after RUNNER_BREAKER_FAILURES of them;
 *   honest failures (an answer, then a non-zero exit) do not count; the half-open probe closes it.
 *
 * The stack's presence window is 4 s and its breaker window 30 s, set here so that a runtime's
 * going offline and a breaker's half-open state come within a test's time; the breaker's count is
 * the default, 5.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { memberBreaker, runtimeOnline, startRunUnderBreaker } from '../../src/runs';
import { createTestOrg, type TestMember } from '../harness/identity';
import { spawnDen, type Spawned } from '../harness/process';
import { event, newRunId, runResult, runsClient, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const PRESENCE_WINDOW_MS = 4_000;
const BREAKER_WINDOW_MS = 30_000;

let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
let dir: string;
const spawned: Spawned[] = [];
beforeAll(async () => {
  stack = await startTestStack({
    worker: true,
    env: { RUNNER_PRESENCE_WINDOW: `${PRESENCE_WINDOW_MS}ms`, RUNNER_BREAKER_WINDOW: `${BREAKER_WINDOW_MS}ms` },
  });
  org = await createTestOrg(stack.services.database.db);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-runners-'));
});
afterAll(async () => {
  for (const proc of spawned) proc.child.kill('SIGKILL');
  await Promise.all(spawned.map((proc) => proc.exited));
  await stack.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** `den runtime` running `script` (a shell file, the run's input on stdin), with the credential variables given. */
async function startRuntime(credential: Record<string, string>, script: string) {
  const file = path.join(dir, `script-${spawned.length}.sh`);
  fs.writeFileSync(file, script);
  const proc = spawnDen(
    ['runtime', '--exec', `sh ${file}`, '--wait', '2', '--heartbeat-interval', '1', '--grace', '5', '--label', 'test-runner'],
    {
      DEN_API_URL: stack.url,
      ...credential,
    },
  );
  spawned.push(proc);
  await waitFor(() => proc.output().includes('claiming runs from'), 60_000, { what: 'den runtime to start' });
  return proc;
}

async function runners(member: TestMember) {
  const res = await stack.request('GET', '/v1/automation-runners', { headers: member.headers });
  expect(res.status).toBe(200);
  return res.json.runners as Record<string, unknown>[];
}

async function counter(metric: { get(): Promise<{ values: { value: number; labels: Record<string, unknown> }[] }> }, labels = {}) {
  const values = (await metric.get()).values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return values.reduce((sum, v) => sum + v.value, 0);
}

describe("an admin's runner token", () => {
  it('claims, reports and completes a run; its command and log never see a credential; it is online, then offline', async () => {
    const admin = await org.addMember('admin');
    const minted = await stack.request('POST', '/v1/automation-runners/token', { headers: admin.headers, body: { label: 'test-runner' } });
    expect(minted.status).toBe(201);
    const { token, runnerId } = minted.json;
    const completions = () => counter(stack.services.metrics.ingress, { route: '/v1/automation-runs/{id}/complete' });
    const completedBefore = await completions();

    const runtime = await startRuntime({ DEN_RUNNER_TOKEN: token }, 'env; sleep 8; echo finished');
    const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: admin.memberId });
    // Presence while it works: a few writes a window, not one per heartbeat.
    const writesBefore = await counter(stack.services.metrics.presenceWrites);
    const beatsBefore = await counter(stack.services.metrics.heartbeats);
    const started = Date.now();
    const result = await runResult(stack, org.organizationId, runId, 40_000);
    const elapsed = Date.now() - started;
    const writes = (await counter(stack.services.metrics.presenceWrites)) - writesBefore;
    const beats = (await counter(stack.services.metrics.heartbeats)) - beatsBefore;
    expect(result).toMatchObject({ status: 'succeeded', memberId: admin.memberId });
    expect(beats).toBeGreaterThanOrEqual(6);
    // At most one write per half window, plus the claim's and the first heartbeat's run, plus one of slack.
    expect(writes).toBeLessThanOrEqual(Math.ceil(elapsed / (PRESENCE_WINDOW_MS / 2)) + 3);
    expect(writes).toBeLessThan(beats);

    // Ended through the complete route, after its reports.
    expect((await completions()) - completedBefore).toBe(1);
    const events = (await runsClient(stack, admin.headers).events(runId)).json.events;
    expect(events.at(-1)).toMatchObject({ type: 'terminal', payload: { status: 'succeeded' } });
    const answer: string = result.lastAssistantText ?? '';
    expect(answer).toContain(`DEN_RUN_ID=${runId}`);
    expect(answer).not.toMatch(/DEN_RUNNER_TOKEN|DEN_API_KEY|den_rt_/);
    expect(runtime.output()).not.toMatch(/den_rt_/);

    const listed = (await runners(admin)).find((runner) => runner.runnerId === runnerId);
    expect(listed).toMatchObject({
      memberId: admin.memberId,
      credential: 'runner_token',
      label: 'test-runner',
      online: true,
      paused: false,
    });
    expect(listed!.version).toMatch(/^den-runtime\//);
    const online = () =>
      runtimeOnline(stack.services.database.db, {
        organizationId: org.organizationId,
        memberId: admin.memberId,
        now: Date.now(),
        windowMs: PRESENCE_WINDOW_MS,
      });
    expect(await online()).toBe(true);

    // The token the test minted (the runtime renewed its own) opens nothing but the run routes,
    // not even the presets any member may read; every refusal is the same 403 body.
    const refusals: unknown[] = [];
    for (const [method, route] of [
      ['GET', '/v1/organization/members'],
      ['GET', '/v1/integrations/slack/connections'],
      ['POST', '/v1/mcp-connections/resolve'],
      ['GET', '/v1/mcp-connections/presets'],
    ] as const) {
      const res = await stack.request(method, route, {
        headers: { authorization: `Bearer ${token}` },
        body: method === 'POST' ? { query: 'x' } : undefined,
      });
      expect({ route, status: res.status, reason: res.json?.reason }).toEqual({ route, status: 403, reason: 'runner_token' });
      refusals.push(res.json);
    }
    expect(refusals).toEqual(refusals.map(() => refusals[0]));

    runtime.child.kill('SIGINT');
    expect((await runtime.exited).code).toBe(0);
    const stopped = Date.now();
    await waitFor(
      async () => (await runners(admin)).find((runner) => runner.runnerId === runnerId)?.online === false,
      PRESENCE_WINDOW_MS + 2_000,
      {
        what: 'the stopped runtime to be offline',
      },
    );
    expect(Date.now() - stopped).toBeLessThanOrEqual(PRESENCE_WINDOW_MS + 2_000);
    expect(await online()).toBe(false);

    expect((await stack.request('DELETE', `/v1/automation-runners/${runnerId}`, { headers: admin.headers })).status).toBe(204);
    expect(await stack.request('GET', '/v1/automation-runs', { headers: { authorization: `Bearer ${token}` } })).toMatchObject({
      status: 401,
      json: { error: 'unauthorized', reason: 'runner_token_revoked' },
    });
    expect((await runners(admin)).map((runner) => runner.runnerId)).not.toContain(runnerId);
  }, 120_000);

  it('minted by den runtime from the API key it then forgets: deleting its runner stops the runtime at once', async () => {
    const admin = await org.addMember('admin');
    const runtime = await startRuntime({ DEN_API_KEY: admin.apiKey }, 'env');
    const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: admin.memberId });
    const result = await runResult(stack, org.organizationId, runId, 30_000);
    expect(result.lastAssistantText).not.toContain('DEN_API_KEY');
    expect(result.lastAssistantText).not.toContain(admin.apiKey);
    expect(runtime.output()).not.toContain(admin.apiKey);

    const [listed] = await runners(admin);
    expect(listed).toMatchObject({ memberId: admin.memberId, credential: 'runner_token', online: true });
    expect((await stack.request('DELETE', `/v1/automation-runners/${String(listed!.runnerId)}`, { headers: admin.headers })).status).toBe(
      204,
    );
    // Its next claim is refused: it says why and exits non-zero.
    const exit = await Promise.race([runtime.exited, new Promise((resolve) => setTimeout(resolve, 10_000, 'still running'))]);
    expect(exit).toMatchObject({ code: 1 });
    expect(runtime.output()).toContain('refused the runner token (401 runner_token_revoked: The runner was deleted.)');
  }, 90_000);
});

it("lists an API key's runtime under its member, named by the key and its label, with the run it holds", async () => {
  const member = await org.addMember('member');
  const headers = { ...member.headers, 'x-den-runtime-label': 'my-bot', 'x-den-runtime-version': 'my-bot/2.1' };
  const runId = newRunId();
  expect((await stack.request('POST', `/v1/automation-runs/${runId}/heartbeat`, { headers, body: { attempt: 1 } })).status).toBe(200);
  await runsClient(stack, member.headers).waitForStatus(runId, ['running']);
  const listed = await waitFor(async () => {
    const [runtime] = await runners(member);
    return runtime?.runs === 1 ? runtime : undefined;
  }, 10_000);
  expect(listed).toMatchObject({ memberId: member.memberId, credential: 'api_key', label: 'my-bot', version: 'my-bot/2.1', online: true });
  expect(listed.runnerId).toMatch(/^key_[0-9a-z]+\.[0-9a-f]{12}$/);
  // An owner sees it among the organization's; another member does not.
  expect((await runners(org.owner)).map((runtime) => runtime.runnerId)).toContain(listed.runnerId);
  expect(await runners(await org.addMember('member'))).toEqual([]);
  expect((await runsClient(stack, member.headers).postEvent(runId, event(1, 1, 'terminal'))).status).toBe(200);
  await waitFor(async () => (await runners(member))[0]?.runs === 0, 10_000, { what: 'the ended run to leave the count' });
}, 30_000);

describe("a member's breaker", () => {
  // `crash` exits non-zero without an answer; `honest` answers, then exits non-zero; anything else succeeds.
  const script = 'read input; case "$input" in crash) exit 3;; honest) echo "3 tests failed"; exit 1;; *) echo "fine";; esac';

  async function run(member: TestMember, text: string) {
    const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId, text });
    return { runId, result: await runResult(stack, org.organizationId, runId, 30_000) };
  }

  it('opens after five runtime failures, not counting honest ones, for this member only; the probe closes it', async () => {
    const member = await org.addMember('member');
    const other = await org.addMember('member');
    const key = (who: TestMember) => ({ organizationId: org.organizationId, memberId: who.memberId });
    const runtime = await startRuntime({ DEN_API_KEY: member.apiKey }, script);

    for (const text of ['honest', 'crash', 'honest', 'crash', 'crash', 'honest', 'crash']) {
      const { result } = await run(member, text);
      expect(result).toMatchObject({ status: 'failed', failure: text === 'crash' ? 'runtime' : 'task' });
    }
    expect((await memberBreaker(stack.services.database.db, key(member), Date.now())).phase).toBe('closed');
    expect((await runners(member))[0]).toMatchObject({ paused: false, breaker: 'closed' });

    const fifth = await run(member, 'crash');
    const opened = fifth.result.endedAt!;
    const breaker = await memberBreaker(stack.services.database.db, key(member), Date.now());
    expect(breaker).toMatchObject({ phase: 'open', lastError: 'exit 3', probeRunId: null });
    expect(breaker.pausedUntil).toBeGreaterThanOrEqual(opened + BREAKER_WINDOW_MS);
    const [listed] = await runners(member);
    expect(listed).toMatchObject({ paused: true, breaker: 'open', pausedUntil: breaker.pausedUntil });
    expect(stack.logs.some((line) => line.msg === "a member's runtime breaker opened" && line.memberId === member.memberId)).toBe(true);
    const settings = stack.config.runs.runners.breaker;
    expect(await startRunUnderBreaker(stack.services.database.db, { ...key(member), runId: 'next' }, { now: Date.now(), settings })).toBe(
      false,
    );
    // Other members are never affected.
    expect((await memberBreaker(stack.services.database.db, key(other), Date.now())).phase).toBe('closed');
    expect(await startRunUnderBreaker(stack.services.database.db, { ...key(other), runId: 'theirs' }, { now: Date.now(), settings })).toBe(
      true,
    );

    // Half-open once the window is over: the next invocation probes, and its success closes the breaker.
    await waitFor(() => Date.now() > breaker.pausedUntil!, BREAKER_WINDOW_MS + 5_000, { intervalMs: 500 });
    expect((await memberBreaker(stack.services.database.db, key(member), Date.now())).phase).toBe('half_open');
    expect((await runners(member))[0]).toMatchObject({ paused: false, breaker: 'half_open' });
    const probe = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId, text: 'ok' });
    expect(
      await startRunUnderBreaker(stack.services.database.db, { ...key(member), runId: probe.runId }, { now: Date.now(), settings }),
    ).toBe(true);
    expect(await runResult(stack, org.organizationId, probe.runId, 30_000)).toMatchObject({ status: 'succeeded' });
    await waitFor(async () => (await memberBreaker(stack.services.database.db, key(member), Date.now())).phase === 'closed', 10_000, {
      what: 'the probe to close the breaker',
    });
    expect((await runners(member))[0]).toMatchObject({ paused: false, breaker: 'closed' });

    runtime.child.kill('SIGINT');
    expect((await runtime.exited).code).toBe(0);
  }, 180_000);
});
