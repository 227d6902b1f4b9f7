/**
 * A run belongs to the member whose first report starts it, and the run itself decides who may
 * reach it: real HTTP → real Temporal → real Postgres. Another member's first event racing the
 * owner's, and another member's heartbeat on a live or just-closed run, are 404 and leave nothing.
 */
import { createTestOrg, type TestMember } from '../harness/identity';
import { runHeartbeatSignal, runWorkflowId } from '../../src/runs/contract';
import { event, newRunId, runResult, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

describe('run ownership is decided by the run', () => {
  let stack: TestStack;
  let org: Awaited<ReturnType<typeof createTestOrg>>;
  let alice: TestMember;
  let bob: TestMember;

  beforeAll(async () => {
    stack = await startTestStack({ worker: true });
    org = await createTestOrg(stack.services.database.db);
    alice = await org.addMember('member');
    bob = await org.addMember('member');
  });
  afterAll(() => stack.stop());

  const storedEvents = (runId: string) =>
    stack.services.database.db
      .selectFrom('automation_run_events')
      .select(['sequence', 'payload'])
      .where('organization_id', '=', org.organizationId)
      .where('run_id', '=', runId)
      .orderBy('attempt')
      .orderBy('sequence')
      .execute();

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it.each([0, 5, 15])('refuses the second member of two first events %i ms apart, and records nothing of theirs', async (gapMs) => {
    const id = newRunId();
    const send = (member: TestMember, delayMs: number) =>
      sleep(delayMs).then(() => runsClient(stack, member.headers).postEvent(id, event(1, 1, 'user', { from: member.memberId })));
    const [first, second] = await Promise.all([send(alice, 0), send(bob, gapMs)]);
    const statuses = [first.status, second.status].sort();
    expect(statuses).toEqual([200, 404]);
    const [winner, loser] = first.status === 200 ? [alice, bob] : [bob, alice];
    expect((first.status === 200 ? second : first).json).toEqual({ error: 'not_found', message: 'No such automation run.' });

    const owner = runsClient(stack, winner.headers);
    expect((await owner.postEvent(id, event(1, 2, 'terminal', { from: winner.memberId }))).status).toBe(200);
    const result = await runResult(stack, org.organizationId, id);
    expect(result).toMatchObject({ status: 'succeeded', memberId: winner.memberId, eventCount: 2 });
    const stored = await storedEvents(id);
    expect(stored.map((row) => [Number(row.sequence), (row.payload as { from?: string }).from])).toEqual([
      [1, winner.memberId],
      [2, winner.memberId],
    ]);
    expect((await runsClient(stack, loser.headers).get(id)).status).toBe(404);
  });

  it("refuses another member's heartbeat on a live run even while the owner's are coalesced", async () => {
    const id = newRunId();
    const mine = runsClient(stack, alice.headers);
    expect((await mine.postEvent(id, event(1, 1))).status).toBe(200);
    await mine.waitForStatus(id, ['running']);
    expect((await mine.heartbeat(id, 1)).status).toBe(200);
    const intruder = await runsClient(stack, bob.headers).heartbeat(id, 1);
    expect(intruder.status).toBe(404);
    expect(intruder.json).toEqual({ error: 'not_found', message: 'No such automation run.' });
    // The owner's heartbeats keep being answered.
    expect((await mine.heartbeat(id, 1)).status).toBe(200);
  });

  it("ignores another member's heartbeat that reaches the run as a signal (a race the API cannot see)", async () => {
    const id = newRunId();
    const mine = runsClient(stack, alice.headers);
    expect((await mine.postEvent(id, event(1, 1))).status).toBe(200);
    const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, id));
    await handle.signal(runHeartbeatSignal, { attempt: 1, receivedAt: Date.now() }, { memberId: bob.memberId, admin: false });
    expect((await mine.get(id)).json.lastHeartbeatAt).toBeNull();
    await handle.signal(runHeartbeatSignal, { attempt: 1, receivedAt: Date.now() }, { memberId: alice.memberId, admin: false });
    expect((await mine.get(id)).json.lastHeartbeatAt).toEqual(expect.any(Number));
  });

  it("refuses another member's heartbeat on a just-closed run with 404, not its final status", async () => {
    const id = newRunId();
    const mine = runsClient(stack, alice.headers);
    expect((await mine.postEvent(id, event(1, 1))).status).toBe(200);
    expect((await mine.postEvent(id, event(1, 2, 'terminal', { status: 'failed' }))).status).toBe(200);
    expect((await runResult(stack, org.organizationId, id)).status).toBe('failed');
    const closed = await mine.heartbeat(id, 1);
    expect(closed.status).toBe(409);
    expect(closed.json).toMatchObject({ error: 'run_closed', status: 'failed' });
    const intruder = await runsClient(stack, bob.headers).heartbeat(id, 1);
    expect(intruder.status).toBe(404);
    expect(intruder.json).toEqual({ error: 'not_found', message: 'No such automation run.' });
    expect(await storedEvents(id)).toHaveLength(2);
  });

  it("lets an owner of the organization report to a member's run, as visibility allows today", async () => {
    const id = newRunId();
    expect((await runsClient(stack, alice.headers).postEvent(id, event(1, 1))).status).toBe(200);
    const admin = runsClient(stack, org.owner.headers);
    expect((await admin.heartbeat(id, 1)).status).toBe(200);
    expect((await admin.postEvent(id, event(1, 2))).status).toBe(200);
    expect((await stack.request('GET', `/v1/automation-runs/${id}`, { headers: alice.headers })).json).toMatchObject({
      memberId: alice.memberId,
      eventCount: 2,
    });
  });
});
