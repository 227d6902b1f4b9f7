/**
 * Admission by measured delay on the real stack, on the production target.
 *
 * - While the engine keeps up, a flood of one organization is admitted whole: nothing refused.
 * - Once the engine saturates (its delay past the target and rising), the flooder (A, ignoring
 *   Retry-After) is shed 429 `share`; B, asking one event a little more than a second apart, within
 *   its part of the engine's throughput, never is.
 * - A refusal is answered at once; only a sender that comes back before its Retry-After is held,
 *   and only that sender: A's second runtime, on its own key and honouring Retry-After, never is.
 *
 * The saturation is what a worker would publish of an engine falling behind: a row in
 * `engine_delays` whose delay grows by 500 ms a second (the real worker publishes its own rows
 * beside it; the API reads the worst fresh one).
 */
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

/** The production default of ADMISSION_REFUSAL_HOLD: a quiet sender's answers stay well under it even on a busy machine. */
const HOLD_MS = 1_000;
const TARGET_MS = 2_000;

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({
    worker: true,
    // Production admission; a short interval so the test sees readings within seconds.
    env: {
      ADMISSION_DELAY_TARGET: `${TARGET_MS}ms`,
      ENGINE_DELAY_INTERVAL: '200ms',
      ADMISSION_REFUSAL_HOLD: `${HOLD_MS}ms`,
      ADMISSION_ORG_RATE: '500',
      ADMISSION_ORG_IN_FLIGHT: '8',
    },
  });
});
afterAll(() => stack?.stop());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const metric = (text: string, pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? NaN);

/** Publishes, every 100 ms until stopped, a delay that starts past the target and grows 500 ms a second. */
function saturate(): { stop(): Promise<void> } {
  const started = Date.now();
  let running = true;
  const loop = (async () => {
    while (running) {
      const row = {
        task_queue: stack.services.temporal.taskQueue,
        worker_id: 'test-saturated-engine',
        backlog_age_ms: TARGET_MS + 500 + Math.round((Date.now() - started) / 2),
        backlog_count: 1000,
        lag_ms: 0,
        lag_samples: 0,
        published_at: new Date(),
      };
      await stack.services.database.db
        .insertInto('engine_delays')
        .values(row)
        .onConflict((oc) => oc.columns(['task_queue', 'worker_id']).doUpdateSet(row))
        .execute();
      await sleep(100);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      await stack.services.database.db.deleteFrom('engine_delays').where('worker_id', '=', 'test-saturated-engine').execute();
    },
  };
}

/** Sends new runs' first events over `connections` for `ms`, ignoring Retry-After; what came back. */
async function flood(client: ReturnType<typeof runsClient>, connections: number, ms: number) {
  const end = Date.now() + ms;
  const answers: { status: number; reason?: string; retryAfter: string | null; tookMs: number }[] = [];
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (Date.now() < end) {
        const sentAt = Date.now();
        const res = await client.postEvent(newRunId(), event(1, 1));
        answers.push({
          status: res.status,
          reason: res.json?.reason,
          retryAfter: res.headers.get('retry-after'),
          tookMs: Date.now() - sentAt,
        });
        await sleep(10);
      }
    }),
  );
  return answers;
}

it('admits a lone organization’s flood whole while the engine keeps up', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const answers = await flood(runsClient(stack, org.owner.headers), 4, 3_000);
  expect(answers.length).toBeGreaterThan(10);
  expect(answers.filter((a) => a.status !== 200)).toEqual([]);
}, 30_000);

it('once the engine saturates, sheds the flooder at once, holds only its early returns, and never the quiet one', async () => {
  const db = stack.services.database.db;
  const [flooder, quiet] = [await createTestOrg(db), await createTestOrg(db)];
  const second = await flooder.addMember('member');
  const a = runsClient(stack, flooder.owner.headers);
  const aHonest = runsClient(stack, second.headers);
  const b = runsClient(stack, quiet.owner.headers);
  const engine = saturate();
  try {
    // The API has read the saturation and cut: a flood meets its first refusal.
    await waitFor(async () => (await a.postEvent(newRunId(), event(1, 1))).status === 429, 15_000, {
      what: 'the limit to bind',
      intervalMs: 20,
    });
    const bAnswers: { status: number; tookMs: number }[] = [];
    const honest: { status: number; tookMs: number }[] = [];
    const live = newRunId();
    const steady = (async () => {
      const end = Date.now() + 6_000;
      for (let sequence = 1; Date.now() < end; sequence++) {
        const sentAt = Date.now();
        bAnswers.push({ status: (await b.postEvent(live, event(1, sequence))).status, tookMs: Date.now() - sentAt });
        await sleep(1_200);
      }
    })();
    // A's second runtime: shares A's organization and its refusals, but honours Retry-After.
    const patient = (async () => {
      const end = Date.now() + 6_000;
      while (Date.now() < end) {
        const sentAt = Date.now();
        const res = await aHonest.postEvent(newRunId(), event(1, 1));
        honest.push({ status: res.status, tookMs: Date.now() - sentAt });
        const wait = res.status === 429 ? Number(res.headers.get('retry-after')) * 1000 : 50;
        await sleep(Math.min(wait, Math.max(0, end - Date.now()) + 1));
      }
    })();
    const aAnswers = await flood(a, 4, 6_000);
    await Promise.all([steady, patient]);

    expect(bAnswers.length).toBeGreaterThanOrEqual(4);
    expect(bAnswers.filter((x) => x.status !== 200)).toEqual([]);
    expect(Math.max(...bAnswers.map((x) => x.tookMs))).toBeLessThan(HOLD_MS);
    const shed = aAnswers.filter((x) => x.status === 429);
    expect(shed.length).toBeGreaterThanOrEqual(4);
    expect(shed.every((x) => x.reason === 'share' && Number(x.retryAfter) >= 1)).toBe(true);
    // Coming back within its Retry-After, each of A's connections was held before each refusal
    // after its first: at most one refusal per hold each.
    expect(shed.filter((x) => x.tookMs >= HOLD_MS - 20).length).toBeGreaterThanOrEqual(shed.length - 4);
    expect(shed.length).toBeLessThanOrEqual(4 * Math.ceil(6_000 / HOLD_MS) + 4);
    // The honest runtime of the same organization is refused too, but never held.
    expect(honest.some((x) => x.status === 429)).toBe(true);
    expect(Math.max(...honest.filter((x) => x.status === 429).map((x) => x.tookMs))).toBeLessThan(HOLD_MS);
    const text = (await stack.request('GET', '/metrics')).text;
    expect(metric(text, /^den_admission_total\{class="default",mode="shed",result="shed_delay"\} (\d+)/m)).toBeGreaterThan(0);
    expect(metric(text, /^den_admission_delay_limit (\S+)/m)).toBeGreaterThan(0);
  } finally {
    await engine.stop();
  }
}, 60_000);
