/**
 * Byte budgets are UTF-8 bytes, as Temporal's payload limits are: out-of-order CJK
 * events (3 bytes per character, 1 UTF-16 unit) fill the buffer's budget, the next is refused
 * before the ack, and the full buffer carries over continue-as-new without failing,
 * over the real dev server and Postgres.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { runWorkflowId } from '../../src/runs/contract';
import { BUFFER_MAX_BYTES } from '../../src/runs/state';
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
  const histories = [
    await handle.fetchHistory(),
    ...(first ? [await stack.services.temporal.client.workflow.getHandle(handle.workflowId, first).fetchHistory()] : []),
  ];
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

it('out-of-order CJK events fill the byte budget, are refused past it, and carry over continue-as-new', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const runId = newRunId();
  const cjkEvent = (sequence: number) => event(1, sequence, 'assistant', { text: cjk(80_000) });
  for (let sequence = 1; sequence <= 7; sequence++) expect((await runs.postEvent(runId, event(1, sequence))).status).toBe(200);
  // 9 and 10 wait for 8 (480,000 bytes); 11 would pass the 512 KiB budget: refused before the ack.
  expect((await runs.postEvent(runId, cjkEvent(9))).status).toBe(200);
  expect((await runs.postEvent(runId, cjkEvent(10))).status).toBe(200);
  const full = { status: 409, json: { error: 'buffer_full', expected: 8, maxBufferedBytes: BUFFER_MAX_BYTES } };
  expect(await runs.postEvent(runId, cjkEvent(11))).toMatchObject(full);
  // A small one still fits. It is the 10th event the run holds, so it asks for continue-as-new
  // (RUN_CONTINUE_AS_NEW_EVENTS=10) with the buffer full of CJK text: the next execution carries
  // it and still refuses 11.
  expect((await runs.postEvent(runId, event(1, 12))).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId));
  await waitFor(async () => ((await executions(handle)).continuedAsNew >= 1 ? true : undefined));
  expect(await runs.postEvent(runId, cjkEvent(11))).toMatchObject(full);
  // The gap fills: 8 applies, then the carried 9 and 10; now 11 applies in order, then 12.
  expect((await runs.postEvent(runId, event(1, 8, 'user', { text: 'gap' }))).status).toBe(200);
  expect((await runs.postEvent(runId, cjkEvent(11))).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 13, 'terminal'))).status).toBe(200);
  expect(await runResult(stack, org.organizationId, runId)).toMatchObject({
    status: 'succeeded',
    eventCount: 13,
    ignoredEvents: { overflow: 0 },
  });
  // Every event answered 200 is in the log, once, in order.
  const log = await runs.events(runId, '?limit=100');
  expect(log.json.events.map((e: { sequence: number }) => e.sequence)).toEqual(Array.from({ length: 13 }, (_, i) => i + 1));
  const seen = await executions(handle);
  expect(seen.continuedAsNew).toBeGreaterThanOrEqual(1);
  expect(seen.failures).toEqual([]);
}, 60_000);
