/**
 * Admission by measured delay on the real stack: the worker publishes the engine's delay (its
 * task queues' backlog age and the runs' report lag) every 200 ms, and the API limits new work by
 * it. The target is set below any delay a real engine has (1 ms), so the limit holds from the
 * first reading on. Organization A floods new runs' events and ignores Retry-After; organization
 * B sends one event a little more than a second apart, under its share even at the limit's floor.
 * A is shed (429, `share`), B never is. Each of A's refusals is held ADMISSION_REFUSAL_HOLD
 * (500 ms) before it is answered, so A's four connections, which ignore Retry-After, get at most
 * one refusal each per hold instead of spinning; B's answers are never held.
 */
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const HOLD_MS = 500;

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({
    worker: true,
    env: { ADMISSION_DELAY_TARGET: '1ms', ENGINE_DELAY_INTERVAL: '200ms', ADMISSION_REFUSAL_HOLD: `${HOLD_MS}ms` },
  });
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
  const aShed: { reason?: string; retryAfter: string | null; tookMs: number }[] = [];
  const flood = Array.from({ length: 4 }, async () => {
    while (Date.now() < end) {
      const sentAt = Date.now();
      const res = await a.postEvent(newRunId(), event(1, 1));
      aStatuses[res.status] = (aStatuses[res.status] ?? 0) + 1;
      if (res.status === 429)
        aShed.push({ reason: res.json?.reason, retryAfter: res.headers.get('retry-after'), tookMs: Date.now() - sentAt });
      await sleep(10); // its Retry-After ignored
    }
  });
  const bStatuses: number[] = [];
  const bTookMs: number[] = [];
  const live = newRunId();
  const steady = (async () => {
    for (let sequence = 1; Date.now() < end; sequence++) {
      const sentAt = Date.now();
      bStatuses.push((await b.postEvent(live, event(1, sequence))).status);
      bTookMs.push(Date.now() - sentAt);
      await sleep(1_200);
    }
  })();
  await Promise.all([...flood, steady]);

  expect(bStatuses.length).toBeGreaterThanOrEqual(4);
  expect(bStatuses.every((status) => status === 200)).toBe(true);
  // A was shed on every connection; how much of it was admitted depends on the engine's pace (a
  // held refusal takes 500 ms, an admitted event a few ms), so only the refusals are counted.
  expect(aStatuses[429] ?? 0).toBeGreaterThanOrEqual(4);
  expect(aShed.every((s) => s.reason === 'share' && Number(s.retryAfter) >= 1)).toBe(true);
  // Every refusal was held (a little less than the hold: timers fire early by a millisecond or so);
  // 4 connections over 6 s cannot have been refused more than once per hold each.
  expect(Math.min(...aShed.map((s) => s.tookMs))).toBeGreaterThanOrEqual(HOLD_MS - 20);
  expect(aShed.length).toBeLessThanOrEqual(4 * Math.ceil(6_000 / HOLD_MS));
  expect(Math.max(...bTookMs)).toBeLessThan(HOLD_MS);
  const text = (await stack.request('GET', '/metrics')).text;
  expect(metric(text, /^den_admission_total\{class="default",mode="shed",result="shed_delay"\} (\d+)/m)).toBeGreaterThan(0);
  expect(metric(text, /^den_admission_delay_limit (\S+)/m)).toBeGreaterThan(0);
}, 40_000);
