/**
 * `POST /v1/automation-runs/{id}/complete` over real HTTP, the run's workflow deciding: every status
 * code and body, and the order it takes: after every event the runtime sent before it, out-of-order
 * ones included, exactly as a terminal event with the next sequence.
 */
import { createTestOrg, type TestMember } from '../harness/identity';
import { event, newRunId, runResult, runsClient, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
let member: TestMember;
beforeAll(async () => {
  stack = await startTestStack({ worker: true });
  org = await createTestOrg(stack.services.database.db);
  member = await org.addMember('member');
});
afterAll(() => stack.stop());

const complete = (who: TestMember, runId: string, body: unknown) =>
  stack.request('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/complete`, { headers: who.headers, body });

it('closes the run after its events, is 200 again for the same completion, and 409 run_closed for another', async () => {
  const runs = runsClient(stack, member.headers);
  const runId = newRunId();
  expect((await runs.postEvent(runId, event(1, 1, 'user'))).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 2, 'assistant', { text: 'the answer' }))).status).toBe(200);

  const done = await complete(member, runId, { attempt: 1, status: 'succeeded', result: { files: 2 } });
  expect(done).toMatchObject({ status: 200, json: { ok: true, status: 'succeeded' } });
  expect(await runResult(stack, org.organizationId, runId)).toMatchObject({ status: 'succeeded', eventCount: 3 });
  const events = (await runs.events(runId)).json.events;
  expect(events.map((e: { sequence: number; type: string }) => [e.sequence, e.type])).toEqual([
    [1, 'user'],
    [2, 'assistant'],
    [3, 'terminal'],
  ]);
  expect(events[2].payload).toEqual({ status: 'succeeded', result: { files: 2 } });

  expect(await complete(member, runId, { attempt: 1, status: 'succeeded' })).toMatchObject({
    status: 200,
    json: { ok: true, status: 'succeeded' },
  });
  expect(await complete(member, runId, { attempt: 1, status: 'failed', error: 'late' })).toMatchObject({
    status: 409,
    json: { error: 'run_closed', status: 'succeeded' },
  });
}, 60_000);

it('waits behind out-of-order events for their gap, then closes after all of them', async () => {
  const runs = runsClient(stack, member.headers);
  const runId = newRunId();
  expect((await runs.postEvent(runId, event(1, 1))).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 3))).status).toBe(200); // buffered: 2 is missing

  const waiting = await complete(member, runId, { attempt: 1, status: 'failed', error: 'tool crashed', failure: 'runtime' });
  expect(waiting).toMatchObject({ status: 200, json: { ok: true, status: 'running' } });
  // Repeated while it waits: the run already holds it.
  expect(await complete(member, runId, { attempt: 1, status: 'failed' })).toMatchObject({
    status: 200,
    json: { ok: true, status: 'running' },
  });
  // Another final status while it waits is beyond the terminal event it holds.
  expect(await complete(member, runId, { attempt: 1, status: 'succeeded' })).toMatchObject({
    status: 409,
    json: { error: 'after_terminal', terminalSequence: 4 },
  });
  // An event after the completion is refused as after a terminal event.
  expect(await runs.postEvent(runId, event(1, 5))).toMatchObject({ status: 409, json: { error: 'after_terminal', terminalSequence: 4 } });

  expect((await runs.postEvent(runId, event(1, 2))).status).toBe(200);
  expect(await runResult(stack, org.organizationId, runId)).toMatchObject({ status: 'failed', error: 'tool crashed', failure: 'runtime' });
  const events = (await runs.events(runId)).json.events;
  expect(events.map((e: { sequence: number }) => e.sequence)).toEqual([1, 2, 3, 4]);
  expect(events.at(-1)).toMatchObject({ type: 'terminal', payload: { status: 'failed', error: 'tool crashed', failure: 'runtime' } });
}, 60_000);

it('refuses a stale attempt (409 stale_attempt) and an unclaimed queued run (409 not_claimed)', async () => {
  const runs = runsClient(stack, member.headers);
  const runId = newRunId();
  expect((await runs.postEvent(runId, event(2, 1))).status).toBe(200);
  expect(await complete(member, runId, { attempt: 1, status: 'succeeded' })).toMatchObject({
    status: 409,
    json: { error: 'stale_attempt', status: 'running' },
  });

  const queued = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId });
  expect(await complete(member, queued.runId, { attempt: 1, status: 'succeeded' })).toMatchObject({
    status: 409,
    json: { error: 'not_claimed', status: 'queued' },
  });
  await stack.request('POST', `/v1/automation-runs/${queued.runId}/cancel`, { headers: member.headers });
}, 60_000);

it("answers 404 for a run that does not exist (it never starts one) and for another member's run", async () => {
  const runId = newRunId();
  expect(await complete(member, runId, { attempt: 1, status: 'succeeded' })).toMatchObject({ status: 404, json: { error: 'not_found' } });
  expect(await runsClient(stack, member.headers).get(runId)).toMatchObject({ status: 404 });

  const other = await org.addMember('member');
  const theirs = newRunId();
  expect((await runsClient(stack, other.headers).postEvent(theirs, event(1, 1))).status).toBe(200);
  await runsClient(stack, other.headers).waitForStatus(theirs, ['running']);
  expect(await complete(member, theirs, { attempt: 1, status: 'succeeded' })).toMatchObject({ status: 404, json: { error: 'not_found' } });
  // An owner reaches it.
  expect(await complete(org.owner, theirs, { attempt: 1, status: 'cancelled' })).toMatchObject({
    status: 200,
    json: { status: 'cancelled' },
  });
}, 60_000);

it('refuses an invalid body with 400, naming each problem', async () => {
  const res = await complete(member, newRunId(), { attempt: 0, status: 'done', failure: 'cosmic', error: 7 });
  expect(res.status).toBe(400);
  const paths = res.json.details.map((d: { path: string[] }) => d.path.join('.')).sort();
  expect(paths).toEqual(['attempt', 'error', 'failure', 'status']);
  expect((await complete(member, newRunId(), undefined)).status).toBe(400);
});
