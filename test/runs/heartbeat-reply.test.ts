/**
 * What a heartbeat reply tells a runtime besides `ok`, as runners written for the product this
 * spec comes from read it: the run's current `attempt` and whether the heartbeat's attempt holds
 * the lease (`leaseValid`), over real HTTP; and the rule itself (heartbeatLease).
 */
import { heartbeatLease } from '../../src/runs/report';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

describe('heartbeatLease', () => {
  it('a run the heartbeat starts, or a newer attempt of a run without claims, holds the lease', () => {
    expect(heartbeatLease(undefined, 3)).toEqual({ attempt: 3, leaseValid: true });
    expect(heartbeatLease({ status: 'running', attempt: 1 }, 2)).toEqual({ attempt: 2, leaseValid: true });
  });
  it('the current attempt holds it while the run runs; an older one, or a lost lease, does not', () => {
    expect(heartbeatLease({ status: 'running', attempt: 2 }, 2)).toEqual({ attempt: 2, leaseValid: true });
    expect(heartbeatLease({ status: 'running', attempt: 2 }, 1)).toEqual({ attempt: 2, leaseValid: false });
    expect(heartbeatLease({ status: 'awaiting_retry', attempt: 1, claimRequired: true }, 1)).toEqual({ attempt: 1, leaseValid: false });
    expect(heartbeatLease({ status: 'awaiting_retry', attempt: 1, claimRequired: true }, 2)).toEqual({ attempt: 1, leaseValid: false });
  });
});

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ worker: true });
});
afterAll(() => stack.stop());

it('the reply carries the run’s attempt and whether the heartbeat’s attempt holds the lease', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const id = newRunId();
  expect((await runs.postEvent(id, event(1, 1, 'user', { text: 'hi' }))).status).toBe(200);
  expect((await runs.heartbeat(id, 1)).json).toMatchObject({ ok: true, attempt: 1, leaseValid: true });
  // A second attempt takes the run over (a runtime-started run needs no claim).
  expect((await runs.postEvent(id, event(2, 1, 'user', { text: 'again' }))).status).toBe(200);
  await waitFor(async () => (await runs.get(id)).json.attempt === 2, 10_000, { what: 'attempt 2 in the row' });
  expect((await runs.heartbeat(id, 2)).json).toMatchObject({ ok: true, attempt: 2, leaseValid: true });
  // The first attempt's runtime learns it no longer holds the lease.
  expect((await runs.heartbeat(id, 1)).json).toMatchObject({ ok: true, attempt: 2, leaseValid: false });
});
