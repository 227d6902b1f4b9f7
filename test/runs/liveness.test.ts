/**
 * Liveness with short real timers (the workflow's own `condition` deadlines on a real Temporal):
 * lease loss → awaiting_retry → failed/lease_lost; a second attempt resuming; heartbeats that
 * keep a run alive; max duration; an unclaimed queued run.
 */
import { automationRun } from '../../workflows/runs';
import { WorkflowIdReusePolicy } from '@temporalio/client';
import { runWorkflowId, type RunWorkflowInput } from '../../src/runs/contract';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runResult, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('run liveness with a 2 s lease', () => {
  let stack: TestStack;
  let org: Awaited<ReturnType<typeof createTestOrg>>;
  let runs: ReturnType<typeof runsClient>;

  beforeAll(async () => {
    stack = await startTestStack({
      worker: true,
      env: { RUN_LEASE_TIMEOUT: '2s', RUN_RETRY_WINDOW: '2s', RUN_MAX_ATTEMPTS: '2', RUN_MAX_DURATION: '60s' },
    });
    org = await createTestOrg(stack.services.database.db);
    runs = runsClient(stack, org.owner.headers);
  });
  afterAll(() => stack.stop());

  it('a run that stops heartbeating waits for a retry, then fails with lease_lost', async () => {
    const id = newRunId();
    const lastReport = Date.now();
    expect((await runs.postEvent(id, event(1, 1))).status).toBe(200);
    const waiting = await runs.waitForStatus(id, ['awaiting_retry'], 6_000);
    expect(Date.now() - lastReport).toBeGreaterThanOrEqual(1_900);
    expect(waiting).toMatchObject({ attempt: 1, leaseExpiresAt: null, endedAt: null, error: null });
    // The lost attempt cannot come back: its events are refused before the ack.
    expect(await runs.postEvent(id, event(1, 2))).toMatchObject({
      status: 409,
      json: { error: 'stale_attempt', status: 'awaiting_retry' },
    });
    const result = await runResult(stack, org.organizationId, id, 8_000);
    expect(result).toMatchObject({ status: 'failed', error: 'lease_lost', attempt: 1, eventCount: 1 });
    expect(result.endedAt! - waiting.startedAt).toBeGreaterThanOrEqual(3_900);
    const late = await runs.heartbeat(id, 2);
    expect(late.status).toBe(409);
    expect(late.json).toEqual({ error: 'run_closed', status: 'failed' });
  });

  it('a second attempt resumes a run whose first attempt lost its lease, and it succeeds', async () => {
    const id = newRunId();
    await runs.heartbeat(id, 1);
    await runs.postEvent(id, event(1, 1, 'assistant', { text: 'partial' }));
    await runs.waitForStatus(id, ['awaiting_retry'], 6_000);
    expect((await runs.heartbeat(id, 2)).status).toBe(200);
    const resumed = await runs.waitForStatus(id, ['running'], 3_000);
    expect(resumed).toMatchObject({ attempt: 2 });
    await runs.postEvent(id, event(2, 1, 'assistant', { text: 'complete answer' }));
    await runs.postEvent(id, event(2, 2, 'terminal', { status: 'succeeded' }));
    const result = await runResult(stack, org.organizationId, id);
    expect(result).toMatchObject({ status: 'succeeded', attempt: 2, eventCount: 3, lastAssistantText: 'complete answer', error: null });
  });

  it('heartbeats keep a run alive past its lease', async () => {
    const id = newRunId();
    const started = Date.now();
    // The coalescing window is lease/4 = 500 ms, so one heartbeat every 600 ms is forwarded each time.
    while (Date.now() - started < 3_500) {
      expect((await runs.heartbeat(id, 1)).status).toBe(200);
      await sleep(600);
    }
    const alive = await runs.get(id);
    expect(alive.json).toMatchObject({ status: 'running', attempt: 1 });
    expect(alive.json.lastHeartbeatAt).toBeGreaterThan(started + 2_500);
    expect(alive.json.leaseExpiresAt).toBeGreaterThan(Date.now());
    await runs.postEvent(id, event(1, 1, 'terminal', { status: 'cancelled' }));
    expect((await runResult(stack, org.organizationId, id)).status).toBe('cancelled');
  });
});

describe('run deadlines: max duration and unclaimed queued runs', () => {
  let stack: TestStack;
  let org: Awaited<ReturnType<typeof createTestOrg>>;
  let runs: ReturnType<typeof runsClient>;

  beforeAll(async () => {
    stack = await startTestStack({
      worker: true,
      env: { RUN_LEASE_TIMEOUT: '2s', RUN_MAX_DURATION: '2500ms', RUN_CLAIM_DEADLINE: '1s' },
    });
    org = await createTestOrg(stack.services.database.db);
    runs = runsClient(stack, org.owner.headers);
  });
  afterAll(() => stack.stop());

  it('a run longer than RUN_MAX_DURATION ends timed_out, heartbeats or not; an unclaimed queued run ends skipped', async () => {
    const id = newRunId();
    const queuedId = newRunId();
    const input: RunWorkflowInput = {
      organizationId: org.organizationId,
      runId: queuedId,
      initialStatus: 'queued',
      createdAt: Date.now(),
      settings: { ...stack.config.runs.defaults },
    };
    await stack.services.temporal.client.workflow.start(automationRun, {
      workflowId: runWorkflowId(org.organizationId, queuedId),
      taskQueue: stack.services.temporal.taskQueue,
      args: [input],
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    });

    const started = Date.now();
    let last = await runs.heartbeat(id, 1);
    while (last.status === 200 && Date.now() - started < 6_000) {
      await sleep(600);
      last = await runs.heartbeat(id, 1);
    }
    expect(last.status).toBe(409);
    expect(last.json).toEqual({ error: 'run_closed', status: 'timed_out' });
    const result = await runResult(stack, org.organizationId, id);
    expect(result).toMatchObject({ status: 'timed_out', error: 'max_duration_exceeded' });
    expect(result.endedAt! - result.startedAt!).toBeGreaterThanOrEqual(2_500);

    expect(await runResult(stack, org.organizationId, queuedId)).toMatchObject({
      status: 'skipped',
      error: 'runner_unavailable',
      attempt: 0,
      startedAt: null,
    });
    const listed = await runs.list('?status=skipped');
    expect(listed.json.runs.map((r: { id: string }) => r.id)).toEqual([queuedId]);
  });
});
