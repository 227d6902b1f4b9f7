/**
 * Admission by measured delay on the real stack: the worker publishes the engine's delay (its
 * task queues' backlog age and the runs' report lag) every 200 ms, and the API limits new work by
 * it. The target is set below any delay a real engine has (1 ms), so the limit holds from the
 * first reading on. Organization A floods new runs' events and ignores Retry-After; organization
 * B sends one event a little more than a second apart, under its share even at the limit's floor.
 * A is shed (429, `share`), B never is.
 */
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ worker: true, env: { ADMISSION_DELAY_TARGET: '1ms', ENGINE_DELAY_INTERVAL: '200ms' } });
});
afterAll(() => stack?.stop());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const metric = (text: string, pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? NaN);

it('sheds the flooding organization by measured delay and never the quiet one under its share', async () => {
  const db = stack.services.database.db;
  const [flooder, quiet] = [await createTestOrg(db), await createTestOrg(db)];
  const a = runsClient(stack, flooder.owner.headers);
  const b = runsClient(stack, quiet.owner.headers);
  // The workers have published a delay and this API has read it.
  await waitFor(
    async () => {
      await a.postEvent(newRunId(), event(1, 1));
      return metric((await stack.request('GET', '/metrics')).text, /^den_engine_delay_seconds (\S+)/m) >= 0;
    },
    10_000,
    { what: 'a delay reading', intervalMs: 200 },
  );

  const end = Date.now() + 6_000;
  const aStatuses: Record<number, number> = {};
  const aShed: { reason?: string; retryAfter: string | null }[] = [];
  const flood = Array.from({ length: 4 }, async () => {
    while (Date.now() < end) {
      const res = await a.postEvent(newRunId(), event(1, 1));
      aStatuses[res.status] = (aStatuses[res.status] ?? 0) + 1;
      if (res.status === 429) aShed.push({ reason: res.json?.reason, retryAfter: res.headers.get('retry-after') });
      await sleep(10); // its Retry-After ignored
    }
  });
  const bStatuses: number[] = [];
  const live = newRunId();
  const steady = (async () => {
    for (let sequence = 1; Date.now() < end; sequence++) {
      bStatuses.push((await b.postEvent(live, event(1, sequence))).status);
      await sleep(1_200);
    }
  })();
  await Promise.all([...flood, steady]);

  expect(bStatuses.length).toBeGreaterThanOrEqual(4);
  expect(bStatuses.every((status) => status === 200)).toBe(true);
  expect(aStatuses[429] ?? 0).toBeGreaterThan(aStatuses[200] ?? 0);
  expect(aShed.every((s) => s.reason === 'share' && Number(s.retryAfter) >= 1)).toBe(true);
  const text = (await stack.request('GET', '/metrics')).text;
  expect(metric(text, /^den_admission_total\{class="default",mode="shed",result="shed_delay"\} (\d+)/m)).toBeGreaterThan(0);
  expect(metric(text, /^den_admission_delay_limit (\S+)/m)).toBeGreaterThan(0);
}, 40_000);
