/**
 * The lease timer follows the lease (patch `lease-timer-follows`): a forwarded heartbeat that
 * moves the lease by a quarter of it or more sets the run's timer again in the workflow task that
 * applied it, so the timer fires when the lease really ends. Before, the timer fired at the end
 * the heartbeat had already moved, and a second workflow task set it again: two tasks per forward.
 * Over real HTTP, the real worker and the dev server, reading the run's history.
 */
import { temporal } from '@temporalio/proto';
import { runWorkflowId } from '../../src/runs/contract';
import { createTestOrg } from '../harness/identity';
import { newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

const EventType = temporal.api.enums.v1.EventType;
const LEASE_MS = 8_000;

let stack: TestStack;
beforeAll(async () => {
  // A window of a tenth of the lease: every heartbeat below is forwarded.
  stack = await startTestStack({ worker: true, env: { RUN_LEASE_TIMEOUT: `${LEASE_MS}ms`, RUN_HEARTBEAT_COALESCE_FRACTION: '0.1' } });
});
afterAll(() => stack?.stop());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it('sets the timer again in the task that applied a heartbeat moving the lease by a quarter, and fires only at the real end', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const runId = newRunId();
  expect((await runs.heartbeat(runId, 1)).status).toBe(200);
  await runs.waitForStatus(runId, ['running']);
  // Two forwards, each moving the lease by more than a quarter of it (2 s).
  await sleep(2_500);
  expect((await runs.heartbeat(runId, 1)).json).toMatchObject({ leaseValid: true });
  await sleep(2_500);
  expect((await runs.heartbeat(runId, 1)).json).toMatchObject({ leaseValid: true });
  await sleep(1_000);

  const history = await stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId)).fetchHistory();
  const types = (history.events ?? []).map((e) => e.eventType);
  const signals = types.filter((t) => t === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED).length;
  expect(signals).toBe(3);
  // Each later forward cancelled the timer set for the end it moved, and set one for the new end.
  expect(types.filter((t) => t === EventType.EVENT_TYPE_TIMER_CANCELED)).toHaveLength(2);
  expect(types.filter((t) => t === EventType.EVENT_TYPE_TIMER_STARTED)).toHaveLength(3);
  // 6 s after the first heartbeat, no lease end has passed: no timer has fired.
  expect(types.filter((t) => t === EventType.EVENT_TYPE_TIMER_FIRED)).toHaveLength(0);
  // The last timer is set for the lease the last heartbeat set: 8 s.
  const lastTimer = [...(history.events ?? [])].reverse().find((e) => e.timerStartedEventAttributes)!;
  const seconds = Number(lastTimer.timerStartedEventAttributes!.startToFireTimeout!.seconds ?? 0);
  expect(seconds).toBeGreaterThanOrEqual(LEASE_MS / 1000 - 1);
  expect(seconds).toBeLessThanOrEqual(LEASE_MS / 1000);

  // The runtime stops: the lease runs out once, at its end, and the run says so.
  await runs.waitForStatus(runId, ['awaiting_retry', 'failed'], 20_000);
}, 40_000);
