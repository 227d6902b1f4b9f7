/**
 * What operators see: a run's outcome is its workflow's status. A run that failed
 * (its lease lost, or its runtime said so), timed out or was never claimed ends its workflow
 * Failed, with an ApplicationFailure whose type names the outcome and whose detail is the run's
 * summary; succeeded and cancelled runs end Completed. Either way the row in Postgres is closed
 * first, the closed workflow still answers its query, and the read route answers as before.
 */
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { runSearchAttributes, runSummaryOfFailure, runSummaryQuery, runWorkflowId, type RunSummary } from '../../src/runs/contract';
import { LOGGED_TEXT_MAX_LENGTH } from '../../src/runs/log-text';
import { endedByOwnLogic, reconcileRun } from '../../src/runs/reconcile';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runsClient, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
let runs: ReturnType<typeof runsClient>;

beforeAll(async () => {
  // One attempt per run, so a lost lease ends the run at once (failed/lease_lost).
  stack = await startTestStack({ worker: true, env: { RUN_LEASE_TIMEOUT: '2s', RUN_MAX_ATTEMPTS: '1' } });
  org = await createTestOrg(stack.services.database.db);
  runs = runsClient(stack, org.owner.headers);
});
afterAll(() => stack.stop());

const handleOf = (runId: string): WorkflowHandle =>
  stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId));

const row = (runId: string) =>
  stack.services.database.db
    .selectFrom('automation_runs')
    .select(['status', 'summary'])
    .where('organization_id', '=', org.organizationId)
    .where('run_id', '=', runId)
    .executeTakeFirst();

/** Awaits a run the way any caller would, bounded: its result, or the failure it ended with. */
async function settle(runId: string): Promise<{ result?: RunSummary; failure?: WorkflowFailedError }> {
  const ended = handleOf(runId)
    .result()
    .then((result: RunSummary) => ({ result }))
    .catch((error: unknown) => {
      if (error instanceof WorkflowFailedError) return { failure: error };
      throw error;
    });
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`run ${runId} did not end`)), 15_000).unref());
  return Promise.race([ended, timeout]);
}

/** The run ended Failed with `type`; its failure carries the summary, already in Postgres. */
async function expectFailedWith(runId: string, type: string, expected: Partial<RunSummary>): Promise<RunSummary> {
  const { failure } = await settle(runId);
  expect(failure).toBeInstanceOf(WorkflowFailedError);
  // Read before anything else: the row was closed before the workflow failed, not after.
  expect(await row(runId)).toMatchObject({
    status: expected.status,
    summary: expect.objectContaining({ status: expected.status, error: expected.error }),
  });
  const cause = failure!.cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  expect(cause).toMatchObject({ type, nonRetryable: true, message: `run ${expected.status}: ${expected.error}` });
  const summary = runSummaryOfFailure(failure);
  expect(summary).toMatchObject({ id: runId, ...expected });
  expect((cause as ApplicationFailure).details).toEqual([summary]);

  const description = await handleOf(runId).describe();
  expect(description.status.name).toBe('FAILED');
  expect(description.typedSearchAttributes.get(runSearchAttributes.RunStatus)).toBe(expected.status);
  // A closed workflow still answers its query, Failed as Completed.
  expect(await handleOf(runId).query(runSummaryQuery)).toMatchObject({ id: runId, ...expected });
  // Ended by its own logic: reconciling neither rewrites the row nor reads it as workflow_failed.
  const deps = {
    settings: stack.config.runs,
    db: stack.services.database.db,
    ingress: stack.ingress,
  };
  expect(await reconcileRun(deps, org.organizationId, runId)).toBe(expected.status);
  expect(await row(runId)).toMatchObject({ summary: expect.objectContaining({ error: expected.error }) });
  return summary!;
}

describe('a run whose outcome is a failure ends its workflow Failed', () => {
  it('lease lost: FAILED (RunFailed, lease_lost), the row, the read route and later reports as before', async () => {
    const id = newRunId();
    expect((await runs.postEvent(id, event(1, 1, 'assistant', { text: 'half an answer' }))).status).toBe(200);
    const summary = await expectFailedWith(id, 'RunFailed', {
      status: 'failed',
      error: 'lease_lost',
      attempt: 1,
      eventCount: 1,
      lastAssistantText: 'half an answer',
    });
    expect(summary.endedAt).not.toBeNull();

    const read = await runs.get(id);
    expect(read.status).toBe(200);
    expect(read.json).toMatchObject({ id, status: 'failed', error: 'lease_lost', attempt: 1, eventCount: 1, memberId: org.owner.memberId });
    expect((await runs.events(id)).json.events).toHaveLength(1);
    expect(await runs.heartbeat(id, 1)).toMatchObject({ status: 409, json: { error: 'run_closed', status: 'failed' } });
    expect(await runs.postEvent(id, event(1, 2))).toMatchObject({ status: 409, json: { error: 'run_closed', status: 'failed' } });
    expect((await runs.list('?status=failed&limit=500')).json.runs.map((r: RunSummary) => r.id)).toContain(id);
  });

  it('reported failed by the runtime: FAILED (RunFailed) with its own error; repeating the terminal is still 200', async () => {
    const id = newRunId();
    const terminal = event(1, 2, 'terminal', { status: 'failed', error: 'tool_crashed' });
    expect((await runs.postEvent(id, event(1, 1, 'assistant', { text: 'trying' }))).status).toBe(200);
    expect((await runs.postEvent(id, terminal)).status).toBe(200);
    await expectFailedWith(id, 'RunFailed', { status: 'failed', error: 'tool_crashed', eventCount: 2 });
    expect((await runs.get(id)).json).toMatchObject({
      id,
      status: 'failed',
      error: 'tool_crashed',
      countsByType: { assistant: 1, terminal: 1 },
    });
    // The same completion again (a runtime retrying after a lost response) is not refused.
    expect((await runs.postEvent(id, terminal)).status).toBe(200);
  });

  it('a long terminal error is logged cut to LOGGED_TEXT_MAX_LENGTH characters and an ellipsis, and stored whole', async () => {
    const id = newRunId();
    const error = `boom-${id}-${'x'.repeat(1000)}-tail`;
    expect((await runs.postEvent(id, event(1, 1, 'terminal', { status: 'failed', error }))).status).toBe(200);
    await expectFailedWith(id, 'RunFailed', { status: 'failed', error, eventCount: 1 });
    expect((await runs.get(id)).json).toMatchObject({ id, status: 'failed', error });
    const status = await waitFor(() =>
      stack.logs.find((line) => line.msg === 'run status' && line.runId === id && line.status === 'failed'),
    );
    expect(status.error).toBe(`${error.slice(0, LOGGED_TEXT_MAX_LENGTH)}…`);
    // No line of the log carries more of it than that.
    const everything = stack.logs.map((line) => JSON.stringify(line)).join('\n');
    expect(everything).toContain(error.slice(0, LOGGED_TEXT_MAX_LENGTH));
    expect(everything).not.toContain(error.slice(0, LOGGED_TEXT_MAX_LENGTH + 1));
  });

  it('timed out: FAILED (RunTimedOut); never claimed: FAILED (RunSkipped)', async () => {
    const owner = { organizationId: org.organizationId, memberId: org.owner.memberId };
    const long = await startQueuedRun(stack, { ...owner, settings: { maxDurationMs: 1_500, leaseTimeoutMs: 60_000 } });
    const unclaimed = await startQueuedRun(stack, { ...owner, settings: { claimDeadlineMs: 2_000 } });
    expect((await runs.claim(long.runId)).status).toBe(200);
    await expectFailedWith(long.runId, 'RunTimedOut', { status: 'timed_out', error: 'max_duration_exceeded' });
    await expectFailedWith(unclaimed.runId, 'RunSkipped', { status: 'skipped', error: 'runner_unavailable', attempt: 0 });
    expect((await runs.get(unclaimed.runId)).json).toMatchObject({ status: 'skipped', error: 'runner_unavailable' });
  });

  it('the visibility query of docs/operations.md lists a run that lost its lease', async () => {
    const id = newRunId();
    expect((await runs.heartbeat(id, 1)).status).toBe(200);
    await expectFailedWith(id, 'RunFailed', { status: 'failed', error: 'lease_lost' });
    const query = `WorkflowType = 'automationRun' AND ExecutionStatus = 'Failed' AND RunStatus = 'failed' AND OrgId = '${org.organizationId}' AND CloseTime > '${new Date(Date.now() - 3_600_000).toISOString()}'`;
    // Visibility is eventually consistent.
    await waitFor(
      async () => {
        for await (const info of stack.services.temporal.client.workflow.list({ query }))
          if (info.workflowId === runWorkflowId(org.organizationId, id)) return true;
        return false;
      },
      10_000,
      { what: 'the run in the visibility query' },
    );
  });
});

describe('a run whose outcome is not a failure ends its workflow Completed', () => {
  it.each([
    ['succeeded', {}],
    ['cancelled', { status: 'cancelled' }],
  ] as const)('%s: COMPLETED with the summary as its result', async (status, payload) => {
    const id = newRunId();
    expect((await runs.postEvent(id, event(1, 1, 'terminal', payload))).status).toBe(200);
    const { result, failure } = await settle(id);
    expect(failure).toBeUndefined();
    expect(result).toMatchObject({ id, status, error: null });
    expect((await handleOf(id).describe()).status.name).toBe('COMPLETED');
    expect(await row(id)).toMatchObject({ status });
    expect((await runs.get(id)).json).toMatchObject({ id, status });
  });
});

it("endedByOwnLogic: Failed is the run's own end only for a failure outcome it published", () => {
  expect(endedByOwnLogic('COMPLETED', 'succeeded')).toBe(true);
  expect(endedByOwnLogic('COMPLETED', 'cancelled')).toBe(true);
  for (const status of ['failed', 'timed_out', 'skipped']) expect(endedByOwnLogic('FAILED', status)).toBe(true);
  expect(endedByOwnLogic('FAILED', 'cancelled')).toBe(false);
  expect(endedByOwnLogic('FAILED', 'running')).toBe(false);
  expect(endedByOwnLogic('FAILED', undefined)).toBe(false);
  expect(endedByOwnLogic('TERMINATED', 'failed')).toBe(false);
});
