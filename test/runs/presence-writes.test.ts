/**
 * How often a runtime's presence is written, over real HTTP: once for each run it is first seen
 * working on, and not again at each heartbeat, even for a runtime (one API key) working on more
 * runs than its presence row lists.
 */
import { createTestOrg } from '../harness/identity';
import { sendHonouringRetryAfter } from '../harness/retry-after';
import { newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ worker: true });
});
afterAll(() => stack.stop());

const presenceWrites = async () => (await stack.services.metrics.presenceWrites.get()).values.reduce((sum, v) => sum + v.value, 0);

/** A heartbeat as a runtime sends it: a refusal or an outage (the suite's cores saturated) is sent again after its Retry-After. */
const beat = (runs: ReturnType<typeof runsClient>, id: string) =>
  sendHonouringRetryAfter(
    () => runs.heartbeat(id, 1),
    (res) => res.status !== 200,
  );

it('a runtime heartbeating 40 runs (more than the 16 its row lists) writes once per run, not once per heartbeat', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const ids = Array.from({ length: 40 }, () => newRunId());
  const before = await presenceWrites();
  // Each run's first heartbeat starts it: the runtime is first seen on it.
  for (const id of ids) expect((await beat(runs, id)).json).toMatchObject({ ok: true, leaseValid: true });
  const afterFirst = (await presenceWrites()) - before;
  expect(afterFirst).toBeGreaterThanOrEqual(ids.length);
  // Two more rounds on the same runs: nothing new to say about this runtime within the window
  // (the old rule remembered the 16 newest runs only, and wrote again for each of the other 24).
  for (let round = 0; round < 2; round += 1) {
    for (const id of ids) expect((await beat(runs, id)).json).toMatchObject({ ok: true, leaseValid: true });
  }
  const afterRounds = (await presenceWrites()) - before;
  // At most a few more: the half-window refresh, should the rounds straddle it, and the presence
  // of other tests' runtimes still at work on this stack. The old rule wrote 80.
  expect(afterRounds - afterFirst).toBeLessThanOrEqual(5);
});
