/**
 * A heartbeat during a slow engine is never a 200 followed by a lost lease. The API reaches
 * Temporal through a proxy that, from some moment on, holds every byte 1.5 s each way (a signal
 * then takes 3 s to be answered, within TEMPORAL_START_TIMEOUT), while the worker keeps its own
 * fast connection, so the run's lease timer fires on time. The run's lease is 3 s and its
 * runtime beats every 250 ms: the forward due once the window (0.7 of the lease) has passed
 * cannot land before the lease it would extend runs out. Every 200 that says the lease holds must
 * name a lease end no later than the moment the run is seen to have lost it; the forwards that
 * cannot land in time are answered 503.
 */
import { createTestOrg } from '../harness/identity';
import { newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { startTcpProxy, type TcpProxy } from '../harness/tcp-proxy';

const LEASE = { RUN_LEASE_TIMEOUT: '3s', RUN_HEARTBEAT_COALESCE_FRACTION: '0.7' };

let worker: TestStack;
let api: TestStack;
let proxy: TcpProxy;

beforeAll(async () => {
  worker = await startTestStack({ worker: true, env: LEASE });
  const [host, port] = worker.config.temporal.address!.split(':');
  proxy = await startTcpProxy({ host: host!, port: Number(port) });
  // The API alone, on the worker's task queue, reaching Temporal through the proxy.
  api = await startTestStack({
    env: {
      ...LEASE,
      TEMPORAL_ADDRESS: `127.0.0.1:${proxy.port}`,
      TEMPORAL_TASK_QUEUE: worker.services.temporal.taskQueue,
      TEMPORAL_START_TIMEOUT: '5s',
    },
  });
});
afterAll(async () => {
  await api?.stop();
  await proxy?.close();
  await worker?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Answer {
  sentAt: number;
  status: number;
  leaseValid?: boolean;
  leaseExpiresAt?: number;
}

it('answers 503, never a 200 whose lease runs out, when a forward cannot land before the lease', async () => {
  const org = await createTestOrg(worker.services.database.db);
  const runs = runsClient(api, org.owner.headers);
  const runId = newRunId();
  const db = worker.services.database.db;
  expect((await runs.heartbeat(runId, 1)).status).toBe(200); // starts the run, lease 3 s
  await runs.waitForStatus(runId, ['running']);

  // When the run is first seen without its lease, read every 50 ms from the worker's side.
  let lostSeenAt: number | undefined;
  const watching = (async () => {
    for (const end = Date.now() + 20_000; lostSeenAt === undefined && Date.now() < end; await sleep(50)) {
      const row = await db
        .selectFrom('automation_runs')
        .select('status')
        .where('organization_id', '=', org.organizationId)
        .where('run_id', '=', runId)
        .executeTakeFirst();
      if (row && row.status !== 'running') lostSeenAt = Date.now();
    }
  })();

  const answers: Promise<Answer>[] = [];
  const started = Date.now();
  for (let slow = false; Date.now() - started < 12_000; await sleep(250)) {
    if (!slow && Date.now() - started > 4_000) {
      proxy.delay(1_500);
      slow = true;
    }
    const sentAt = Date.now();
    answers.push(runs.heartbeat(runId, 1).then((res) => ({ sentAt, status: res.status, ...(res.json ?? {}) })));
  }
  const all = await Promise.all(answers);
  await watching;
  proxy.delay(0);

  // Before the engine slowed down, every heartbeat was taken.
  expect(all.filter((a) => a.sentAt < started + 3_500).every((a) => a.status === 200 && a.leaseValid === true)).toBe(true);
  // The engine was too slow for the lease: the run lost it. No answer said the lease held beyond
  // the moment it was seen lost; the forwards that could not land in time said 503.
  expect(lostSeenAt).toBeDefined();
  const promised = all.filter((a) => a.status === 200 && a.leaseValid === true).map((a) => a.leaseExpiresAt!);
  expect(promised.filter((end) => end > lostSeenAt!)).toEqual([]);
  expect(all.filter((a) => a.status === 503).length).toBeGreaterThan(0);
  expect(all.every((a) => a.status === 200 || a.status === 503)).toBe(true);
}, 40_000);
