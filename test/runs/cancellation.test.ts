/**
 * Cancellation is a first-class outcome: an operator's cancel, sent through the
 * Temporal client exactly as the Web UI and `temporal workflow cancel` send it, closes a run
 * `cancelled` within seconds, with its row saying so and no workflow-task failure in its history.
 * (Every earlier test terminated workflows, which skips the workflow's own code entirely.)
 */
import type { WorkflowHandle } from '@temporalio/client';
import { runWorkflowId, type RunSummary } from '../../src/runs/contract';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runsClient, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ worker: true });
});
afterAll(() => stack.stop());

async function workflowTaskFailures(handle: WorkflowHandle): Promise<number> {
  const history = await handle.fetchHistory();
  return (history.events ?? []).filter((e) => e.workflowTaskFailedEventAttributes).length;
}

async function rowStatus(organizationId: string, runId: string) {
  return (
    await stack.services.database.db
      .selectFrom('automation_runs')
      .select(['status', 'summary'])
      .where('organization_id', '=', organizationId)
      .where('run_id', '=', runId)
      .executeTakeFirst()
  )?.status;
}

/** Resolves with the run's result, or fails the test after `ms` (a wedged run never resolves). */
const within = <T>(ms: number, promise: Promise<T>) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`not closed within ${ms} ms`)), ms).unref())]);

describe('an operator cancels a run', () => {
  it.each(['queued', 'claimed'] as const)('a %s run closes cancelled, with its row, and no workflow-task failure', async (stage) => {
    const org = await createTestOrg(stack.services.database.db);
    const runs = runsClient(stack, org.owner.headers);
    const { runId, handle } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: org.owner.memberId });
    if (stage === 'claimed') {
      expect((await runs.claim(runId)).status).toBe(200);
      expect((await runs.postEvent(runId, event(1, 1, 'assistant', { text: 'working' }))).status).toBe(200);
    }
    await handle.cancel();
    const result = (await within(10_000, handle.result())) as RunSummary;
    expect(result).toMatchObject({ status: 'cancelled', error: 'cancel_requested' });
    expect(await rowStatus(org.organizationId, runId)).toBe('cancelled');
    expect(await workflowTaskFailures(handle)).toBe(0);
    // Closed: reports are refused, and a claim too.
    expect(await runs.heartbeat(runId, 1)).toMatchObject({ status: 409, json: { error: 'run_closed', status: 'cancelled' } });
    if (stage === 'claimed') expect((await runs.events(runId)).json.events).toHaveLength(1);
  });

  it('a running run cancelled while events stream in keeps every acked event', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const runs = runsClient(stack, org.owner.headers);
    const runId = newRunId();
    for (let sequence = 1; sequence <= 20; sequence++) expect((await runs.postEvent(runId, event(1, sequence))).status).toBe(200);
    const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId));
    await handle.cancel();
    expect(await within(10_000, handle.result())).toMatchObject({ status: 'cancelled', eventCount: 20 });
    const stored = (await runs.events(runId, '?limit=100')).json.events as { sequence: number }[];
    expect(stored.map((e) => e.sequence)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(await workflowTaskFailures(handle)).toBe(0);
  });
});

it('waits for the row before it says so: the list shows the cancelled run', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const { runId, handle } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: org.owner.memberId });
  await handle.cancel();
  await within(10_000, handle.result());
  const listed = await waitFor(async () => (await runs.list('?status=cancelled')).json.runs.find((r: { id: string }) => r.id === runId));
  expect(listed).toMatchObject({ id: runId, status: 'cancelled', error: 'cancel_requested' });
});
