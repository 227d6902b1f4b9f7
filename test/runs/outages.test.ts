/**
 * Runs keep their lease through what is not theirs to decide:
 * - heartbeats do not need Postgres: the API loses Postgres for longer than the run's lease
 *   (its connections go through a proxy the test cuts) while the worker keeps its own, and the
 *   run's heartbeats still reach Temporal, so the run stays `running`; another member's do not
 *   (the run's query says whose it is); a runner token keeps working through it, but not one
 *   revoked before it: the revocation's announcement made the API forget it;
 * - the coalescing window comes from the run, not the API's current settings: a run with a 4 s
 *   lease, heartbeating every 500 ms through an API whose default lease is 60 s, keeps its lease.
 */
import { Client } from 'pg';
import { runSummaryQuery, runWorkflowId } from '../../src/runs/contract';
import { createTestOrg } from '../harness/identity';
import { newRunId, runsClient, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { startTcpProxy, type TcpProxy } from '../harness/tcp-proxy';

let worker: TestStack;
beforeAll(async () => {
  worker = await startTestStack({ worker: true });
});
afterAll(() => worker.stop());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Each answer as `status` or `status dependency` (a 503 names what was unavailable). */
async function heartbeatFor(
  ms: number,
  intervalMs: number,
  send: () => Promise<{ status: number; json?: { dependency?: string } }>,
): Promise<string[]> {
  const answers: string[] = [];
  for (const end = Date.now() + ms; Date.now() < end; await sleep(intervalMs)) {
    const res = await send();
    answers.push(res.status === 503 ? `503 ${res.json?.dependency}` : String(res.status));
  }
  return answers;
}

/**
 * Postgres is never why a heartbeat fails. Under a loaded machine (CI), Temporal itself may
 * answer a signal after TEMPORAL_START_TIMEOUT now and then: a 503 naming Temporal is the
 * service telling the truth, not a lost lease, so a few are tolerated; the run must stay live.
 */
function expectHeartbeatsThrough(answers: string[]) {
  expect(answers.filter((answer) => answer !== '200' && answer !== '503 temporal')).toEqual([]);
  expect(answers.filter((answer) => answer === '200').length).toBeGreaterThanOrEqual(answers.length * 0.8);
}

describe('a Postgres outage of the API longer than the lease', () => {
  let api: TestStack;
  let proxy: TcpProxy;
  beforeAll(async () => {
    const url = new URL(worker.config.database.url!);
    proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    url.port = String(proxy.port);
    // The API alone, on the worker's task queue, reaching Postgres through the proxy.
    api = await startTestStack({
      env: { DATABASE_URL: url.toString(), TEMPORAL_TASK_QUEUE: worker.services.temporal.taskQueue, RUN_LEASE_TIMEOUT: '3s' },
    });
  });
  afterAll(async () => {
    await api.stop();
    await proxy.close();
  });

  // First in this block: a cut leaves the API's notification connection reopening with a backoff
  // (up to 30 s), and a token verified while it is not listening is not remembered for an outage.
  it('keeps a runner token working, but not one whose runner was deleted before it', async () => {
    const org = await createTestOrg(worker.services.database.db);
    const mint = async () =>
      (await api.request('POST', '/v1/automation-runners/token', { headers: org.owner.headers, body: {} })).json as {
        token: string;
        runnerId: string;
      };
    const [kept, deleted] = [await mint(), await mint()];
    const keptRuns = runsClient(api, { authorization: `Bearer ${kept.token}` });
    const deletedRuns = runsClient(api, { authorization: `Bearer ${deleted.token}` });
    const [keptRun, deletedRun] = [newRunId(), newRunId()];
    // Each token verified once (and so remembered for an outage), each starting a run of its own.
    expect((await keptRuns.heartbeat(keptRun, 1)).status).toBe(200);
    expect((await deletedRuns.heartbeat(deletedRun, 1)).status).toBe(200);
    await keptRuns.waitForStatus(keptRun, ['running']);

    // A listener of the test's own says when the deletion was announced; the API's hears it at the same time.
    const listener = new Client({ connectionString: worker.config.database.url });
    await listener.connect();
    await listener.query('LISTEN runner_tokens');
    const announced = new Promise((resolve) => listener.once('notification', resolve));
    expect((await api.request('DELETE', `/v1/automation-runners/${deleted.runnerId}`, { headers: org.owner.headers })).status).toBe(204);
    await announced;
    await listener.end();
    await sleep(300);
    // Every remembered token was forgotten: the kept one is verified (and remembered) again by its next call.
    expect((await keptRuns.heartbeat(keptRun, 1)).status).toBe(200);

    proxy.cut();
    let during: string[];
    let refused;
    try {
      refused = await deletedRuns.heartbeat(deletedRun, 1);
      during = await heartbeatFor(5_000, 500, () => keptRuns.heartbeat(keptRun, 1));
    } finally {
      proxy.restore();
    }
    expect(refused).toMatchObject({ status: 503, json: { error: 'unavailable', dependency: 'postgres' } });
    expectHeartbeatsThrough(during);
    expect(await deletedRuns.heartbeat(deletedRun, 1)).toMatchObject({ status: 401, json: { reason: 'runner_token_revoked' } });
  }, 40_000);

  it('does not cost a live run its lease: heartbeats still reach the run', async () => {
    const org = await createTestOrg(worker.services.database.db);
    const runs = runsClient(api, org.owner.headers);
    const runId = newRunId();
    expect((await runs.heartbeat(runId, 1)).status).toBe(200); // starts the run, lease 3 s
    await runs.waitForStatus(runId, ['running']);

    proxy.cut();
    const during = await heartbeatFor(7_000, 500, () => runs.heartbeat(runId, 1));
    // Events carry data that must reach Postgres: those get the 503.
    expect((await runs.postEvent(runId, { attempt: 1, sequence: 1, type: 'user', payload: {}, createdAt: 0 })).status).toBe(503);
    proxy.restore();

    expectHeartbeatsThrough(during);
    const live = await worker.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId)).query(runSummaryQuery);
    expect(live).toMatchObject({ status: 'running', attempt: 1 });
  }, 30_000);

  it("does not widen what a member reaches: another member's heartbeat is refused while the row cannot be read", async () => {
    const org = await createTestOrg(worker.services.database.db);
    const [alice, bob] = [await org.addMember('member'), await org.addMember('member')];
    const mine = runsClient(api, alice.headers);
    const theirs = runsClient(api, bob.headers);
    const runId = newRunId();
    expect((await mine.heartbeat(runId, 1)).status).toBe(200);
    await mine.waitForStatus(runId, ['running']);
    // This process verified the intruder's key before the outage, so it still authenticates.
    expect((await theirs.list()).status).toBe(200);
    const handle = worker.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId));
    const before = await handle.query(runSummaryQuery);

    proxy.cut();
    let intruder;
    try {
      intruder = await theirs.heartbeat(runId, 1);
    } finally {
      proxy.restore();
    }
    expect(intruder.status).toBe(404);
    expect(intruder.json).toEqual({ error: 'not_found', message: 'No such automation run.' });
    expect((await handle.query(runSummaryQuery)).lastHeartbeatAt).toBe(before.lastHeartbeatAt);
  }, 30_000);
});

it("coalesces a run's heartbeats by its own lease, not the API's current setting", async () => {
  const org = await createTestOrg(worker.services.database.db);
  const runs = runsClient(worker, org.owner.headers);
  // The API's default lease is 60 s (a 15 s window); this run's is 4 s (a 1 s window).
  const { runId } = await startQueuedRun(worker, {
    organizationId: org.organizationId,
    memberId: org.owner.memberId,
    settings: { leaseTimeoutMs: 4_000 },
  });
  expect((await runs.claim(runId)).status).toBe(200);
  expectHeartbeatsThrough(await heartbeatFor(9_000, 500, () => runs.heartbeat(runId, 1)));
  const live = await worker.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId)).query(runSummaryQuery);
  expect(live).toMatchObject({ status: 'running', attempt: 1 });
}, 30_000);
