/**
 * A member's or admin's cancel, over real HTTP with the real worker and Postgres: POST
 * /v1/automation-runs/{id}/cancel and its answers (202, 404, 409, 400), a queued run that closes
 * at once, a claimed run that records the request and tells its runtime in the heartbeat reply,
 * still takes reports, and ends cancelled at its terminal event or when its lease runs out.
 */
import { githubTarget } from '../../workflows/github';
import { requestRunCancelUpdate, runWorkflowId } from '../../src/runs/contract';
import { CANCEL_REASON_MAX_LENGTH } from '../../src/runs/schemas';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runResult, runsClient, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ worker: true });
});
afterAll(() => stack.stop());

async function memberRun(settings?: { leaseTimeoutMs: number }) {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const runs = runsClient(stack, member.headers);
  const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId, settings });
  const cancel = (body?: unknown, headers = member.headers) =>
    stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/cancel`, { headers, body });
  return { org, member, runs, runId, cancel };
}

it('a queued run closes cancelled at once, with the reason; asking again is a 409', async () => {
  const { org, member, runs, runId, cancel } = await memberRun();
  const res = await cancel({ reason: 'asked the wrong thing' });
  expect(res).toMatchObject({ status: 202, json: { status: 'cancelled', cancelRequested: true } });
  const result = await runResult(stack, org.organizationId, runId);
  expect(result).toMatchObject({
    status: 'cancelled',
    error: 'asked the wrong thing',
    cancelRequested: { reason: 'asked the wrong thing', memberId: member.memberId },
  });
  expect((await runs.get(runId)).json).toMatchObject({ status: 'cancelled', cancelRequested: { reason: 'asked the wrong thing' } });
  expect(await cancel({})).toMatchObject({ status: 409, json: { error: 'run_closed', status: 'cancelled' } });
  expect((await runs.claim(runId)).status).toBe(409);
});

it("another member's run and an unknown run are 404; an admin may cancel a member's run", async () => {
  const { org, runs, runId, cancel } = await memberRun();
  const other = await org.addMember('member');
  expect(await cancel(undefined, other.headers)).toMatchObject({ status: 404, json: { error: 'not_found' } });
  const unknown = await stack.request('POST', `/v1/automation-runs/${newRunId()}/cancel`, { headers: other.headers, body: {} });
  expect(unknown).toMatchObject({ status: 404, json: { error: 'not_found' } });
  expect((await runs.get(runId)).json.status).toBe('queued');
  const admin = await org.addMember('admin');
  expect(await cancel(undefined, admin.headers)).toMatchObject({ status: 202, json: { status: 'cancelled' } });
  expect((await runResult(stack, org.organizationId, runId)).cancelRequested).toMatchObject({ memberId: admin.memberId, reason: null });
});

it('refuses a reason longer than the bound, and a body that is not an object (400)', async () => {
  const { cancel, runs, runId } = await memberRun();
  expect(await cancel({ reason: 'x'.repeat(CANCEL_REASON_MAX_LENGTH + 1) })).toMatchObject({
    status: 400,
    json: { error: 'invalid_request' },
  });
  expect((await cancel([1])).status).toBe(400);
  expect((await runs.get(runId)).json.status).toBe('queued');
});

it('a claimed run records the request, tells its heartbeats, keeps taking reports, and ends cancelled at its terminal', async () => {
  const { org, runs, runId, cancel } = await memberRun();
  expect((await runs.claim(runId)).status).toBe(200);
  const before = Date.now();
  const first = await runs.heartbeat(runId, 1);
  expect(first).toMatchObject({ status: 200, json: { ok: true, cancelRequested: false } });
  expect(first.json.leaseExpiresAt).toBeGreaterThanOrEqual(before + stack.config.runs.defaults.leaseTimeoutMs);

  expect(await cancel({ reason: 'stop' })).toMatchObject({ status: 202, json: { status: 'running', cancelRequested: true } });
  // The row already says so (the Update answered once it was written), and a coalesced heartbeat too.
  expect((await runs.get(runId)).json).toMatchObject({ status: 'running', cancelRequested: { reason: 'stop' } });
  expect((await runs.heartbeat(runId, 1)).json).toMatchObject({ ok: true, cancelRequested: true });
  expect(await cancel({ reason: 'again' })).toMatchObject({ status: 202, json: { status: 'running' } });

  expect((await runs.postEvent(runId, event(1, 1, 'assistant', { text: 'partial answer' }))).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 2, 'terminal', { status: 'succeeded' }))).status).toBe(200);
  const result = await runResult(stack, org.organizationId, runId);
  expect(result).toMatchObject({ status: 'cancelled', error: 'stop', eventCount: 2, cancelRequested: { reason: 'stop' } });
  expect((await runs.events(runId)).json.events).toHaveLength(2);
});

it('a claimed run whose runtime goes quiet after the request ends cancelled when its lease runs out, not retried', async () => {
  const { org, runs, runId, cancel } = await memberRun({ leaseTimeoutMs: 1_500 });
  expect((await runs.claim(runId)).status).toBe(200);
  expect((await cancel()).status).toBe(202);
  const result = await runResult(stack, org.organizationId, runId);
  expect(result).toMatchObject({ status: 'cancelled', error: 'cancel_requested', attempt: 1 });
});

it('a cancel taken elsewhere reaches the heartbeat reply within one coalescing window', async () => {
  // A 4 s lease: no answer from memory rests on a forward older than 0.7 of it (RUN_HEARTBEAT_COALESCE_FRACTION's default), 2.8 s.
  const { org, member, runs, runId } = await memberRun({ leaseTimeoutMs: 4_000 });
  expect((await runs.claim(runId)).status).toBe(200);
  expect((await runs.heartbeat(runId, 1)).json.cancelRequested).toBe(false);
  // As the Slack side (another process) asks: straight to the run, so this API's coalescer is not told.
  const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, runId));
  await handle.executeUpdate(requestRunCancelUpdate, { args: [{ requestedAt: Date.now() }, { memberId: member.memberId, admin: false }] });
  const asked = Date.now();
  const answers: { at: number; cancelRequested: boolean }[] = [];
  while (Date.now() - asked < 4_000) {
    const res = await runs.heartbeat(runId, 1);
    answers.push({ at: Date.now() - asked, cancelRequested: res.json.cancelRequested });
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(answers.filter((a) => a.at > 2_800 + 200 && !a.cancelRequested)).toEqual([]);
  expect(answers.at(-1)?.cancelRequested).toBe(true);
});

it('a run whose code has no cancel handler (a worker of an older release, mid-deploy) answers 503 with Retry-After, not 500', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runId = newRunId();
  // An open workflow under the run's id whose code registers no requestRunCancel handler, as a
  // release before run cancels would run it: the target actor, idle for a minute.
  const { client, taskQueue } = stack.services.temporal;
  const handle = await client.workflow.start(githubTarget, {
    taskQueue,
    workflowId: runWorkflowId(org.organizationId, runId),
    args: [{ targetId: `target-${runId}`, repository: 'octo/old-release', idleMs: 60_000 }],
  });
  try {
    const res = await stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/cancel`, {
      headers: org.owner.headers,
      body: {},
    });
    expect(res.status).toBe(503);
    expect(res.json).toMatchObject({ error: 'unavailable', dependency: 'temporal' });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  } finally {
    await handle.terminate('test over');
  }
});

it('the OpenAPI document lists the cancel route and the heartbeat reply', async () => {
  const doc = (await stack.request('GET', '/openapi.json')).json;
  const cancel = doc.paths['/v1/automation-runs/{id}/cancel'].post;
  expect(Object.keys(cancel.responses).sort()).toEqual(['202', '400', '401', '404', '409', '413', '429', '503']);
  expect(doc.components.schemas.AutomationRunCancelRequest.properties.reason).toMatchObject({ maxLength: 500 });
  const heartbeat = doc.paths['/v1/automation-runs/{id}/heartbeat'].post.responses['200'].content['application/json'].schema;
  expect(heartbeat).toEqual({ $ref: '#/components/schemas/AutomationRunHeartbeatReply' });
  expect(doc.components.schemas.AutomationRunHeartbeatReply.required.sort()).toEqual([
    'attempt',
    'cancelRequested',
    'leaseExpiresAt',
    'leaseValid',
    'ok',
  ]);
});
