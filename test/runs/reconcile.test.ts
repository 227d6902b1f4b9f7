/**
 * Runs that ended outside their own logic: an operator's terminate, or a workflow
 * Temporal has forgotten. The row is closed with what happened, and a closed row refuses the id,
 * so a report after retention can never start a fresh run whose writes the row would ignore.
 */
import { runWorkflowId } from '../../src/runs/contract';
import { sweepStaleRuns } from '../../src/runs/reconcile';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ worker: true });
});
afterAll(() => stack.stop());

const row = (organizationId: string, runId: string) =>
  stack.services.database.db
    .selectFrom('automation_runs')
    .select(['status', 'summary'])
    .where('organization_id', '=', organizationId)
    .where('run_id', '=', runId)
    .executeTakeFirst();

/** A running run with one persisted event, then terminated by an operator (its code never runs again). */
async function terminatedRun() {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const runId = newRunId();
  expect((await runs.postEvent(runId, event(1, 1))).status).toBe(200);
  await runs.waitForStatus(runId, ['running']);
  await stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId)).terminate('operator');
  expect((await row(org.organizationId, runId))?.status).toBe('running');
  return { org, runs, runId };
}

it('a terminated run: the next report gets 409 run_closed and the row is closed (failed, workflow_terminated)', async () => {
  const { org, runs, runId } = await terminatedRun();
  expect(await runs.heartbeat(runId, 1)).toMatchObject({ status: 409, json: { error: 'run_closed', status: 'failed' } });
  expect(await row(org.organizationId, runId)).toMatchObject({
    status: 'failed',
    summary: expect.objectContaining({ error: 'workflow_terminated' }),
  });
});

it('a terminated run read by id is reconciled, not answered `running` from a replayed query', async () => {
  const { runs, runId } = await terminatedRun();
  expect((await runs.get(runId)).json).toMatchObject({ status: 'failed', error: 'workflow_terminated' });
  expect((await runs.list('?status=failed')).json.runs.map((r: { id: string }) => r.id)).toContain(runId);
});

it('the worker sweep closes open rows older than any run could live', async () => {
  const { org, runId } = await terminatedRun();
  await stack.services.database.db
    .updateTable('automation_runs')
    .set({ created_at: new Date(Date.now() - 3 * 86_400_000) })
    .where('organization_id', '=', org.organizationId)
    .where('run_id', '=', runId)
    .execute();
  const deps = {
    settings: stack.config.runs,
    db: stack.services.database.db,
    ingress: stack.ingress,
  };
  expect(await sweepStaleRuns(deps, new Date(), 10_000)).toBeGreaterThanOrEqual(1);
  expect((await row(org.organizationId, runId))?.status).toBe('failed');
});

it('a report for an id Temporal has forgotten (after retention) is refused from the row, not silently restarted', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const runId = newRunId();
  // The row of a run whose workflow is gone: open, and older than any run could live.
  const createdAt = Date.now() - 3 * 86_400_000;
  await stack.services.database.db
    .insertInto('automation_runs')
    .values({
      organization_id: org.organizationId,
      run_id: runId,
      status: 'running',
      attempt: 1,
      member_id: org.owner.memberId,
      created_at: new Date(createdAt),
      version: 7,
      summary: JSON.stringify({
        id: runId,
        organizationId: org.organizationId,
        status: 'running',
        attempt: 1,
        createdAt,
        memberId: org.owner.memberId,
      }),
    })
    .execute();
  expect(await runs.postEvent(runId, event(1, 2))).toMatchObject({ status: 409, json: { error: 'run_closed', status: 'failed' } });
  expect(await row(org.organizationId, runId)).toMatchObject({
    status: 'failed',
    summary: expect.objectContaining({ error: 'workflow_not_found' }),
  });
  // No workflow was started for it.
  await expect(stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId)).describe()).rejects.toThrow();
});
