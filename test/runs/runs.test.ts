/**
 * Automation runs end to end: real HTTP → real Temporal (the run workflow on this file's worker)
 * → real Postgres. Ordering, dedupe, terminal, closed runs, read routes, coalescing, Slack-style
 * queued runs.
 */
import fc from 'fast-check';
import type { RunSummary } from '../../src/runs/contract';
import { createTestOrg } from '../harness/identity';
import { countSignals, event, newRunId, runResult, runsClient, startQueuedRun, type EventInput } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

describe('automation runs over HTTP', () => {
  let stack: TestStack;
  let org: Awaited<ReturnType<typeof createTestOrg>>;
  let runs: ReturnType<typeof runsClient>;

  beforeAll(async () => {
    stack = await startTestStack({ worker: true });
    org = await createTestOrg(stack.services.database.db);
    runs = runsClient(stack, org.owner.headers);
  });
  afterAll(() => stack.stop());

  const persisted = async (id: string) => {
    const res = await runs.events(id, '?limit=500');
    expect(res.status).toBe(200);
    return res.json.events as (EventInput & { receivedAt: number })[];
  };

  it('applies a run in order, ends it on terminal, and answers later reports with 409', async () => {
    const id = newRunId();
    expect(await runs.postEvent(id, event(1, 1, 'user', { text: 'hi' }))).toMatchObject({ status: 200, json: { ok: true } });
    // The terminal arrives before sequence 2 and 3: it must wait for the gap.
    expect((await runs.postEvent(id, event(1, 4, 'terminal', { status: 'succeeded' }))).status).toBe(200);
    expect((await runs.postEvent(id, event(1, 3, 'assistant', { text: 'answer' }))).status).toBe(200);
    const waiting = await runs.get(id);
    expect(waiting.status).toBe(200);
    expect(waiting.json).toMatchObject({ id, status: 'running', attempt: 1, eventCount: 1 });

    expect((await runs.postEvent(id, event(1, 2, 'usage', { inputTokens: 10, outputTokens: 5, model: 'x' }))).status).toBe(200);
    expect((await runResult(stack, org.organizationId, id)).status).toBe('succeeded');
    // Ended: answered from the automation_runs row.
    const doneRes = await runs.get(id);
    expect(doneRes.status).toBe(200);
    const done = doneRes.json;
    expect(done).toMatchObject({
      id,
      status: 'succeeded',
      attempt: 1,
      eventCount: 4,
      countsByType: { user: 1, usage: 1, assistant: 1, terminal: 1 },
      usage: { inputTokens: 10, outputTokens: 5 },
      error: null,
      memberId: org.owner.memberId,
      leaseExpiresAt: null,
    });
    expect(done.endedAt).toBeGreaterThanOrEqual(done.startedAt);
    expect((await persisted(id)).map((e) => [e.sequence, e.type])).toEqual([
      [1, 'user'],
      [2, 'usage'],
      [3, 'assistant'],
      [4, 'terminal'],
    ]);

    const late = await runs.postEvent(id, event(1, 5, 'user'));
    expect(late.status).toBe(409);
    expect(late.json).toEqual({ error: 'run_closed', status: 'succeeded' });
    const lateHeartbeat = await runs.heartbeat(id, 1);
    expect(lateHeartbeat.status).toBe(409);
    expect(lateHeartbeat.json).toEqual({ error: 'run_closed', status: 'succeeded' });
    // A different completion is a conflict; the same completion again is idempotent (200).
    const otherCompletion = await runs.postEvent(id, event(1, 4, 'terminal', { status: 'failed' }));
    expect(otherCompletion.status).toBe(409);
    expect(otherCompletion.json).toEqual({ error: 'run_closed', status: 'succeeded' });
    const sameCompletion = await runs.postEvent(id, event(1, 4, 'terminal', { status: 'succeeded' }));
    expect(sameCompletion.status).toBe(200);
    expect(sameCompletion.json).toEqual({ ok: true });
  });

  it('Temporal itself refuses to restart a closed run (REJECT_DUPLICATE), not only the table', async () => {
    const id = newRunId();
    await runs.postEvent(id, event(1, 1, 'terminal', { status: 'cancelled', error: 'user_stopped' }));
    const done = await runResult(stack, org.organizationId, id);
    expect(done.error).toBe('user_stopped');
    // Forget the row: the 409 must now come from Temporal's id reuse policy.
    await stack.services.database.db
      .deleteFrom('automation_runs')
      .where('organization_id', '=', org.organizationId)
      .where('run_id', '=', id)
      .execute();
    const res = await runs.postEvent(id, event(1, 2, 'user'));
    expect(res.status).toBe(409);
    expect(res.json).toEqual({ error: 'run_closed', status: 'cancelled' });
  });

  it('property: any permutation of a run with duplicates persists exactly the sorted unique log', async () => {
    const arbitraryRun = fc.integer({ min: 1, max: 15 }).chain((n) =>
      fc.record({
        n: fc.constant(n),
        // Every sequence 1..n+1 at least once (n+1 is the terminal), plus duplicates, in any order.
        order: fc
          .array(fc.integer({ min: 1, max: n + 1 }), { maxLength: n })
          .chain((dupes) =>
            fc.shuffledSubarray([...Array.from({ length: n + 1 }, (_, i) => i + 1), ...dupes], { minLength: n + 1 + dupes.length }),
          ),
      }),
    );
    const eventOf = (n: number, sequence: number): EventInput =>
      sequence === n + 1
        ? event(1, sequence, 'terminal', { status: 'succeeded' })
        : event(1, sequence, 'assistant', { text: `m${sequence}` });

    for (const seed of [1, 42, 2024, 7, 99]) {
      await fc.assert(
        fc.asyncProperty(arbitraryRun, async ({ n, order }) => {
          const id = newRunId();
          let terminalSent = false;
          for (const sequence of order) {
            const res = await runs.postEvent(id, eventOf(n, sequence));
            // Until the terminal is sent the run cannot be closed; after it, a late duplicate may find it closed.
            if (!terminalSent) expect(res.status).toBe(200);
            else expect([200, 409]).toContain(res.status);
            if (sequence === n + 1) terminalSent = true;
          }
          const done = await runResult(stack, org.organizationId, id);
          expect(done.status).toBe('succeeded');
          expect(done.eventCount).toBe(n + 1);
          const log = await persisted(id);
          expect(log.map((e) => e.sequence)).toEqual(Array.from({ length: n + 1 }, (_, i) => i + 1));
          expect(log.map((e) => e.payload)).toEqual(Array.from({ length: n + 1 }, (_, i) => eventOf(n, i + 1).payload));
          expect(log.every((e) => e.attempt === 1)).toBe(true);
        }),
        { seed, numRuns: 3 },
      );
    }
  });

  it('a newer attempt starts over at sequence 1 and older attempts are refused', async () => {
    const id = newRunId();
    await runs.postEvent(id, event(1, 1, 'user'));
    await runs.postEvent(id, event(1, 2, 'user'));
    expect((await runs.heartbeat(id, 2)).status).toBe(200);
    // The old attempt: refused before the ack, so the run never holds it.
    expect(await runs.postEvent(id, event(1, 3, 'user'))).toMatchObject({
      status: 409,
      json: { error: 'stale_attempt', status: 'running' },
    });
    await runs.postEvent(id, event(2, 1, 'assistant', { text: 'second try' }));
    await runs.postEvent(id, event(2, 2, 'terminal'));
    const done = await runResult(stack, org.organizationId, id);
    expect(done).toMatchObject({ attempt: 2, eventCount: 4, ignoredEvents: { stale: 0 } });
    const log = await persisted(id);
    expect(log.map((e) => [e.attempt, e.sequence])).toEqual([
      [1, 1],
      [1, 2],
      [2, 1],
      [2, 2],
    ]);
    // Paging within an attempt.
    const page = await runs.events(id, '?attempt=1&after=1&limit=1');
    expect(page.status).toBe(200);
    expect(page.json.events.map((e: EventInput) => [e.attempt, e.sequence])).toEqual([[1, 2]]);
  });

  it('lists runs newest first, by status', async () => {
    const other = await createTestOrg(stack.services.database.db);
    const client = runsClient(stack, other.owner.headers);
    const first = newRunId();
    const second = newRunId();
    await client.postEvent(first, event(1, 1, 'terminal'));
    await runResult(stack, other.organizationId, first);
    await client.postEvent(second, event(1, 1, 'user'));
    await waitFor(async () => {
      const res = await client.list();
      return res.json.runs.length === 2 ? res : undefined;
    });
    const all = await client.list();
    expect(all.status).toBe(200);
    expect(all.json.runs.map((r: RunSummary) => [r.id, r.status])).toEqual([
      [second, 'running'],
      [first, 'succeeded'],
    ]);
    const succeeded = await client.list('?status=succeeded&limit=10');
    expect(succeeded.json.runs.map((r: RunSummary) => r.id)).toEqual([first]);
    expect((await client.list('?limit=1')).json.runs.map((r: RunSummary) => r.id)).toEqual([second]);
  });

  it('a queued run (as the Slack feature starts it) is listed, claimed, and returns the last assistant text', async () => {
    const { runId, handle } = await startQueuedRun(stack, {
      organizationId: org.organizationId,
      memberId: org.owner.memberId,
      text: 'summarize my inbox',
    });
    const queued = (await runs.list('?status=queued&limit=500')).json.runs.find((r: RunSummary) => r.id === runId);
    expect(queued).toMatchObject({ id: runId, status: 'queued', attempt: 0, memberId: org.owner.memberId, startedAt: null });

    const claimed = await runs.claim(runId);
    expect(claimed.status).toBe(200);
    expect(claimed.json).toMatchObject({ attempt: 1, run: { id: runId, status: 'running', input: { text: 'summarize my inbox' } } });
    expect((await runs.heartbeat(runId, 1)).status).toBe(200);
    await runs.postEvent(runId, event(1, 1, 'assistant', { text: 'first draft' }));
    await runs.postEvent(runId, event(1, 2, 'assistant', { text: 'Here is your summary.' }));
    await runs.postEvent(runId, event(1, 3, 'terminal'));
    const result: RunSummary = await handle.result();
    expect(result).toMatchObject({
      status: 'succeeded',
      attempt: 1,
      lastAssistantText: 'Here is your summary.',
      input: { text: 'summarize my inbox' },
    });
  });

  it('coalesces 100 heartbeats of one (run, attempt) into one signal', async () => {
    const id = newRunId();
    // prom-client hands out its live value objects: read numbers, not references.
    const count = async (result: string) =>
      (await stack.services.metrics.heartbeats.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
    const before = { forwarded: await count('forwarded'), coalesced: await count('coalesced') };
    const responses = await Promise.all(Array.from({ length: 100 }, () => runs.heartbeat(id, 1)));
    expect(responses.every((r) => r.status === 200 && r.json.ok === true)).toBe(true);
    expect((await count('forwarded')) - before.forwarded).toBe(1);
    expect((await count('coalesced')) - before.coalesced).toBe(99);
    await runs.waitForStatus(id, ['running']);
    expect(await countSignals(stack, org.organizationId, id, 'runHeartbeat')).toBe(1);
    // A heartbeat of another attempt is a different key: forwarded.
    expect((await runs.heartbeat(id, 2)).status).toBe(200);
    expect(await countSignals(stack, org.organizationId, id, 'runHeartbeat')).toBe(2);
    const metrics = await stack.request('GET', '/metrics');
    expect(metrics.text).toMatch(/den_run_heartbeats_total\{result="coalesced"\} \d+/);
  });

  it("keeps organizations apart: another organization's key can neither read nor write the run", async () => {
    const id = newRunId();
    await runs.postEvent(id, event(1, 1, 'user', { secret: 'org A' }));
    await runs.waitForStatus(id, ['running']);
    const intruder = await createTestOrg(stack.services.database.db);
    const other = runsClient(stack, intruder.owner.headers);
    const read = await other.get(id);
    expect(read.status).toBe(404);
    expect(read.json).toEqual({ error: 'not_found', message: 'No such automation run.' });
    const readEvents = await other.events(id);
    expect(readEvents.status).toBe(404);
    expect((await other.list()).json.runs.map((r: RunSummary) => r.id)).not.toContain(id);
    // Writing with the same id reaches the intruder's own run, never org A's.
    expect((await other.postEvent(id, event(1, 1, 'terminal', { status: 'failed' }))).status).toBe(200);
    expect((await runResult(stack, intruder.organizationId, id)).status).toBe('failed');
    const mine = await runs.get(id);
    expect(mine.json).toMatchObject({ status: 'running', eventCount: 1 });
    const myEvents = await runs.events(id);
    expect(myEvents.json.events).toEqual([expect.objectContaining({ sequence: 1, type: 'user', payload: { secret: 'org A' } })]);
    // Unauthenticated: 401.
    const anonymous = await stack.request('POST', `/v1/automation-runs/${id}/events`, { body: event(1, 2) });
    expect(anonymous.status).toBe(401);
    expect(anonymous.json).toEqual({ error: 'unauthorized' });
  });

  it('an unknown run is a 404 on the read routes', async () => {
    const id = newRunId();
    const res = await runs.get(id);
    expect(res.status).toBe(404);
    expect(res.json.error).toBe('not_found');
    expect((await runs.events(id)).status).toBe(404);
  });
});
