/**
 * A run's lease starts when the workflow task that started its attempt began; on a busy engine its
 * runtime hears of it much later. Here the worker reaches Temporal through a proxy that holds every
 * byte 900 ms each way while the run starts, so that workflow task takes about two seconds, while
 * the API's link is fast. A runtime beating every second against a 3 s lease finds the lease
 * looking spent at its first heartbeat, though the run's lease timer, set when that task ended,
 * has not fired: the heartbeat is forwarded anyway and answered by what the run then says
 * (src/runs/report.ts, confirmLateHeartbeat), so the run keeps its lease and closes in its first
 * attempt. It used to be answered 503, twice, and the lease lost.
 */
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runResult, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { startTcpProxy, type TcpProxy } from '../harness/tcp-proxy';

const LEASE = { RUN_LEASE_TIMEOUT: '3s' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

let api: TestStack;
let worker: TestStack;
let proxy: TcpProxy;

beforeAll(async () => {
  api = await startTestStack({ env: LEASE });
  const [host, port] = api.config.temporal.address!.split(':');
  proxy = await startTcpProxy({ host: host!, port: Number(port) });
  // The worker alone, on the API's task queue, reaching Temporal through the proxy.
  worker = await startTestStack({
    worker: true,
    env: { ...LEASE, TEMPORAL_ADDRESS: `127.0.0.1:${proxy.port}`, TEMPORAL_TASK_QUEUE: api.services.temporal.taskQueue },
  });
});
afterAll(async () => {
  await worker?.stop();
  await proxy?.close();
  await api?.stop();
});

it('a runtime beating every second against a 3 s lease keeps it when the task that started the run took two seconds', async () => {
  const org = await createTestOrg(api.services.database.db);
  const runs = runsClient(api, org.owner.headers);
  const runId = newRunId();
  proxy.delay(900);
  expect((await runs.postEvent(runId, event(1, 1, 'user', { text: 'go' }))).status).toBe(200);
  proxy.delay(0);
  const start = Date.now();
  const answers: { at: number; status: number; leaseValid?: boolean }[] = [];
  for (let beat = 1; beat <= 10; beat++) {
    await sleep(start + beat * 1_000 - Date.now());
    const reply = await runs.heartbeat(runId, 1);
    answers.push({ at: beat, status: reply.status, leaseValid: reply.json?.leaseValid });
  }
  expect(answers.filter((a) => a.status !== 200 || a.leaseValid !== true)).toEqual([]);
  const closing = await runs.postEvent(runId, event(1, 2, 'terminal', { status: 'succeeded' }));
  expect({ status: closing.status, body: closing.json }).toMatchObject({ status: 200 });
  expect(await runResult(api, org.organizationId, runId)).toMatchObject({ status: 'succeeded', attempt: 1 });
}, 90_000);
