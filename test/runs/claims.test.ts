/**
 * Claims and member visibility, over real HTTP with the real worker and Postgres:
 * exclusive claims decided by the run workflow's Update, claim-next with long-poll, the 409s a
 * runtime meets (already_claimed, not_claimed, stale_attempt, run_closed) and member isolation.
 */
import { createTestOrg } from '../harness/identity';
import { event, runResult, runsClient, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

describe('claims', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ worker: true });
  });
  afterAll(() => stack.stop());

  /** A fresh organization per test: claim-next sees every queued run of the organization. */
  const freshOrg = async () => {
    const org = await createTestOrg(stack.services.database.db);
    const member = await org.addMember('member');
    return { org, member, runs: runsClient(stack, member.headers) };
  };

  it('two concurrent claims of one run: exactly one 200, the other 409 already_claimed', async () => {
    const { org, member, runs } = await freshOrg();
    const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId, text: 'hello' });
    const [a, b] = await Promise.all([runs.claim(runId), runs.claim(runId)]);
    const statuses = [a.status, b.status].sort();
    expect(statuses).toEqual([200, 409]);
    const won = a.status === 200 ? a : b;
    const lost = a.status === 200 ? b : a;
    expect(won.json).toMatchObject({ attempt: 1, run: { id: runId, status: 'running', input: { text: 'hello' } } });
    expect(won.json.leaseExpiresAt).toBeGreaterThan(Date.now());
    expect(lost.json).toEqual({ error: 'already_claimed', status: 'running' });
  });

  it('claim-next on an empty queue answers 204 with no body; with a wait, 204 only after the wait', async () => {
    const { runs } = await freshOrg();
    const now = await runs.claimNext();
    expect(now.status).toBe(204);
    expect(now.text).toBe('');
    const started = Date.now();
    const waited = await runs.claimNext(1);
    expect(waited.status).toBe(204);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('a long-poll returns a run queued during the wait, before the wait ends', async () => {
    const { org, member, runs } = await freshOrg();
    const started = Date.now();
    const poll = runs.claimNext(20);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId });
    const res = await poll;
    expect(res.status).toBe(200);
    expect(res.json.run.id).toBe(runId);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('50 concurrent claim-next calls against 20 queued runs claim 20 distinct runs, none twice', async () => {
    const { org, member, runs } = await freshOrg();
    const queued = await Promise.all(
      Array.from({ length: 20 }, () => startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId })),
    );
    const responses = await Promise.all(Array.from({ length: 50 }, () => runs.claimNext(0)));
    const claimed = responses.filter((r) => r.status === 200).map((r) => r.json.run.id as string);
    expect(responses.every((r) => r.status === 200 || r.status === 204)).toBe(true);
    expect(claimed).toHaveLength(20);
    expect(new Set(claimed).size).toBe(20);
    expect(new Set(claimed)).toEqual(new Set(queued.map((q) => q.runId)));
  }, 60_000);

  it('a queued run takes no report before a claim (409 not_claimed); after it, other attempts get 409 stale_attempt', async () => {
    const { org, member, runs } = await freshOrg();
    const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId });
    expect(await runs.heartbeat(runId, 1)).toMatchObject({ status: 409, json: { error: 'not_claimed', status: 'queued' } });
    expect(await runs.postEvent(runId, event(1, 1))).toMatchObject({ status: 409, json: { error: 'not_claimed' } });

    expect((await runs.claim(runId)).json.attempt).toBe(1);
    expect(await runs.heartbeat(runId, 2)).toMatchObject({ status: 409, json: { error: 'stale_attempt', status: 'running' } });
    expect(await runs.postEvent(runId, event(2, 1))).toMatchObject({ status: 409, json: { error: 'stale_attempt' } });
    expect((await runs.heartbeat(runId, 1)).status).toBe(200);
    expect((await runs.postEvent(runId, event(1, 1, 'terminal'))).status).toBe(200);
    expect((await runResult(stack, org.organizationId, runId)).status).toBe('succeeded');
    expect(await runs.claim(runId)).toMatchObject({ status: 409, json: { error: 'run_closed', status: 'succeeded' } });
  });

  it("members see, claim and report only their own runs; another member's run is a 404 on every run route", async () => {
    const { org, member, runs } = await freshOrg();
    const other = await org.addMember('member');
    const otherRuns = runsClient(stack, other.headers);
    const admin = runsClient(stack, (await org.addMember('admin')).headers);
    const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId });

    const notFound = { status: 404, json: { error: 'not_found' } };
    expect(await otherRuns.get(runId)).toMatchObject(notFound);
    expect(await otherRuns.events(runId)).toMatchObject(notFound);
    expect(await otherRuns.claim(runId)).toMatchObject(notFound);
    expect(await otherRuns.heartbeat(runId, 1)).toMatchObject(notFound);
    expect(await otherRuns.postEvent(runId, event(1, 1))).toMatchObject(notFound);
    expect((await otherRuns.list('?status=queued')).json.runs).toEqual([]);
    expect((await otherRuns.claimNext(0)).status).toBe(204);

    // Owners and admins read every run of the organization.
    expect((await admin.get(runId)).json).toMatchObject({ id: runId, memberId: member.memberId });
    expect((await admin.list('?status=queued')).json.runs.map((r: { id: string }) => r.id)).toEqual([runId]);
    expect((await runs.list('?status=queued')).json.runs.map((r: { id: string }) => r.id)).toEqual([runId]);
    expect((await runs.claim(runId)).status).toBe(200);
  });

  it('an unknown run id is a 404 on claim', async () => {
    const { runs } = await freshOrg();
    expect(await runs.claim('no-such-run')).toMatchObject({ status: 404, json: { error: 'not_found' } });
  });

  it('a claimed run whose runtime dies goes back to the queue, and a second runtime claims the next attempt', async () => {
    const { org, member, runs } = await freshOrg();
    const { runId } = await startQueuedRun(stack, {
      organizationId: org.organizationId,
      memberId: member.memberId,
      settings: { leaseTimeoutMs: 1_500, maxAttempts: 2 },
    });
    expect((await runs.claimNext(0)).json).toMatchObject({ attempt: 1, run: { id: runId } });
    // No heartbeat: the lease runs out and the run waits for the next attempt.
    await runs.waitForStatus(runId, ['awaiting_retry'], 15_000);
    expect(await runs.heartbeat(runId, 1)).toMatchObject({ status: 409, json: { error: 'stale_attempt' } });
    const second = await runs.claimNext(5);
    expect(second.status).toBe(200);
    expect(second.json).toMatchObject({ attempt: 2, run: { id: runId, status: 'running' } });
    expect((await runs.postEvent(runId, event(2, 1, 'terminal'))).status).toBe(200);
    expect(await runResult(stack, org.organizationId, runId)).toMatchObject({ status: 'succeeded', attempt: 2 });
  }, 40_000);
});

it('the OpenAPI document describes the claim routes and the run fields a runtime needs', async () => {
  const stack = await startTestStack();
  try {
    const doc = (await stack.request('GET', '/openapi.json')).json;
    expect(Object.keys(doc.paths['/v1/automation-runs/{id}/claim'].post.responses).sort()).toEqual([
      '200',
      '400',
      '401',
      '404',
      '409',
      '413',
      '429',
      '503',
    ]);
    expect(Object.keys(doc.paths['/v1/automation-runs/claim'].post.responses).sort()).toEqual([
      '200',
      '204',
      '400',
      '401',
      '413',
      '429',
      '503',
    ]);
    expect(doc.components.schemas.AutomationRun.properties).toHaveProperty('input');
    expect(doc.components.schemas.AutomationRun.properties).toHaveProperty('origin');
    expect(doc.components.schemas.AutomationRunClaim.required).toEqual(expect.arrayContaining(['run', 'attempt', 'leaseExpiresAt']));
  } finally {
    await stack.stop();
  }
});
