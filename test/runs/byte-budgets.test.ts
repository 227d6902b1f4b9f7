/**
 * Byte budgets are UTF-8 bytes, as Temporal's payload limits are (issue #17): a burst of
 * out-of-order CJK events (3 bytes per character, 1 UTF-16 unit) at the continue-as-new
 * threshold carries over without failing, over the real dev server and Postgres.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { runWorkflowId } from '../../src/runs/contract';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runResult, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ worker: true, env: { RUN_CONTINUE_AS_NEW_EVENTS: '10' } });
});
afterAll(() => stack.stop());

const cjk = (chars: number) => '漢'.repeat(chars); // 80,000 characters: 240,000 bytes of UTF-8

async function executions(handle: WorkflowHandle): Promise<{ continuedAsNew: number; failures: unknown[] }> {
  const description = await handle.describe();
  const first = description.raw.workflowExecutionInfo?.firstRunId ?? undefined;
  const histories = [await handle.fetchHistory(), ...(first ? [await stack.services.temporal.client.workflow.getHandle(handle.workflowId, first).fetchHistory()] : [])];
  const events = histories.flatMap((h) => h.events ?? []);
  return {
    continuedAsNew: events.filter((e) => e.workflowExecutionContinuedAsNewEventAttributes).length,
    // UnhandledCommand is the server's own protocol when a signal lands while the workflow closes
    // or continues as new (it retries the task with the signal): not a failure of the code.
    failures: events
      .map((e) => e.workflowTaskFailedEventAttributes?.failure?.message)
      .filter((message) => message !== undefined && message !== 'UnhandledCommand'),
  };
}

it('a burst of out-of-order CJK events at the continue-as-new threshold carries over without failing', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const runId = newRunId();
  expect((await runs.postEvent(runId, event(1, 1, 'assistant', { text: cjk(80_000) }))).status).toBe(200);
  // Sequences 3…12 wait for 2: the buffer keeps what fits in its byte budget.
  for (let sequence = 3; sequence <= 12; sequence++) {
    expect((await runs.postEvent(runId, event(1, sequence, 'assistant', { text: cjk(80_000) }))).status).toBe(200);
  }
  const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId));
  // The 10th signal asked for continue-as-new, with a full out-of-order buffer of CJK text.
  const live = await runs.waitForStatus(runId, ['running']);
  expect(live.ignoredEvents.overflow).toBeGreaterThan(0);
  expect((await runs.postEvent(runId, event(1, 2, 'user', { text: 'gap' }))).status).toBe(200);
  // The gap filled: 2 applies, then the buffered 3, 4… in the same signal.
  const applied = await waitFor(async () => {
    const res = await runs.get(runId);
    return res.json.eventCount >= 3 ? res.json : undefined;
  });
  const next = applied.eventCount + 1;
  expect((await runs.postEvent(runId, event(1, next, 'terminal'))).status).toBe(200);
  expect(await runResult(stack, org.organizationId, runId)).toMatchObject({ status: 'succeeded' });
  const seen = await executions(handle);
  expect(seen.continuedAsNew).toBeGreaterThanOrEqual(1);
  expect(seen.failures).toEqual([]);
}, 60_000);
