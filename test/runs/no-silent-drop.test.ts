/**
 * "An ack means durable" for event reports: the run decides on every event before
 * the ack (the `reportRunEvent` Update's validator), so an event answered 200 is applied or
 * kept, and one the run cannot keep gets a 409 saying why. Over real HTTP, the real worker, the
 * dev server and Postgres; each test ends by checking that every 200 is in the persisted log.
 */
import type { TestResponse } from '../harness/stack';
import { runEventSignal, runWorkflowId } from '../../src/runs/contract';
import { BUFFER_MAX_BYTES } from '../../src/runs/state';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runResult, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { sendHonouringRetryAfter } from '../harness/retry-after';
import { waitFor } from '../harness/wait';

let stack: TestStack;
let runs: ReturnType<typeof runsClient>;
let organizationId: string;
beforeAll(async () => {
  stack = await startTestStack({ worker: true, env: { RUN_EVENT_BUFFER_MAX: '50', RUN_MAX_ATTEMPTS: '2' } });
  const org = await createTestOrg(stack.services.database.db);
  organizationId = org.organizationId;
  runs = runsClient(stack, org.owner.headers);
});
afterAll(() => stack.stop());

const sequencesOf = async (runId: string): Promise<number[]> => {
  const res = await runs.events(runId, '?limit=500');
  expect(res.status).toBe(200);
  return res.json.events.map((e: { sequence: number }) => e.sequence);
};
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/**
 * Like a runtime, a 503 ("nothing recorded") is retried: Temporal takes 10 Updates in flight per
 * run, so of many concurrent reports some can outwait TEMPORAL_UPDATE_TIMEOUT on a busy machine.
 * A 429 `share` (admission shedding while the whole suite keeps the engine's delay past its
 * target) is sent again after its Retry-After, as `den runtime` does: nothing was recorded either.
 */
function send(runId: string, body: unknown): Promise<TestResponse> {
  return sendHonouringRetryAfter(
    () => runs.postEvent(runId, body),
    (res) => res.status === 503 || (res.status === 429 && res.json?.reason === 'share'),
  );
}

/** Sends in parallel, 16 at a time, as a runtime with several connections would. */
async function sendAll(runId: string, bodies: unknown[]): Promise<TestResponse[]> {
  const answers: TestResponse[] = [];
  for (let i = 0; i < bodies.length; i += 16)
    answers.push(...(await Promise.all(bodies.slice(i, i + 16).map((body) => send(runId, body)))));
  return answers;
}

async function acceptedUpdates(runId: string): Promise<number> {
  const history = await stack.services.temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId)).fetchHistory();
  return (history.events ?? []).filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).length;
}

it('an out-of-order flood past the buffer: 2..51 are kept, 52..80 refused with the window, and every 200 is persisted', async () => {
  const runId = newRunId();
  const flood = await sendAll(
    runId,
    range(2, 80).map((sequence) => event(1, sequence)),
  );
  flood.forEach((res, i) => {
    const sequence = i + 2;
    if (sequence <= 51) expect(res).toMatchObject({ status: 200, json: { ok: true } });
    else expect(res).toMatchObject({ status: 409, json: { error: 'sequence_out_of_window', expected: 1, max: 51 } });
  });
  expect((await runs.postEvent(runId, event(1, 1))).status).toBe(200);
  await waitFor(async () => ((await sequencesOf(runId)).length === 51 ? true : undefined));
  expect(await sequencesOf(runId)).toEqual(range(1, 51));
  // Refusals never reached the history: one accepted Update per 200.
  expect(await acceptedUpdates(runId)).toBe(51);
  // The window moved: the refused ones are taken now, then the run ends.
  const retried = await sendAll(runId, [...range(52, 80).map((sequence) => event(1, sequence)), event(1, 81, 'terminal')]);
  expect(retried.map((res) => res.status)).toEqual(range(52, 81).map(() => 200));
  expect(await runResult(stack, organizationId, runId)).toMatchObject({
    status: 'succeeded',
    eventCount: 81,
    ignoredEvents: { overflow: 0 },
  });
  expect(await sequencesOf(runId)).toEqual(range(1, 81));
});

it('three 200 KB out-of-order events: two fit the byte budget, the third is refused, and every 200 is persisted', async () => {
  const runId = newRunId();
  const big = (sequence: number) => event(1, sequence, 'user', { blob: 'x'.repeat(200 * 1024) });
  const answers = await Promise.all([2, 3, 4].map((sequence) => send(runId, big(sequence))));
  // Whichever arrives last finds 400 KB buffered.
  expect(answers.map((res) => res.status).sort()).toEqual([200, 200, 409]);
  const refused = answers.find((res) => res.status === 409)!;
  expect(refused.json).toEqual({ error: 'buffer_full', expected: 1, maxBufferedBytes: BUFFER_MAX_BYTES });
  const refusedSequence = [2, 3, 4][answers.indexOf(refused)]!;
  expect((await runs.postEvent(runId, event(1, 1))).status).toBe(200);
  // In order now: it applies at once and needs no buffer.
  expect((await runs.postEvent(runId, big(refusedSequence))).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 5, 'terminal'))).status).toBe(200);
  expect(await runResult(stack, organizationId, runId)).toMatchObject({ status: 'succeeded', eventCount: 5 });
  expect(await sequencesOf(runId)).toEqual(range(1, 5));
});

it('an attempt above RUN_MAX_ATTEMPTS is 409 attempt_out_of_range; a repeat is 200 and held once', async () => {
  const runId = newRunId();
  expect((await runs.postEvent(runId, event(1, 1))).status).toBe(200);
  expect(await runs.postEvent(runId, event(3, 1))).toMatchObject({ status: 409, json: { error: 'attempt_out_of_range', maxAttempts: 2 } });
  expect(await runs.postEvent(runId, event(1, 1))).toMatchObject({ status: 200, json: { ok: true } });
  expect((await runs.postEvent(runId, event(1, 2, 'terminal'))).status).toBe(200);
  expect(await runResult(stack, organizationId, runId)).toMatchObject({
    status: 'succeeded',
    attempt: 1,
    eventCount: 2,
    ignoredEvents: { rejected: 0 },
  });
  expect(await sequencesOf(runId)).toEqual([1, 2]);
});

it('reports racing the close: each is applied or refused with a reason, never acked and dropped', async () => {
  const runId = newRunId();
  for (const sequence of [1, 2, 3]) expect((await runs.postEvent(runId, event(1, sequence))).status).toBe(200);
  // The terminal (4) and later events (5..12) at once: whichever the run sees first decides.
  const raced = await Promise.all(
    [event(1, 4, 'terminal'), ...range(5, 12).map((sequence) => event(1, sequence))].map((body) => send(runId, body)),
  );
  const accepted = new Set<number>();
  raced.forEach((res, i) => {
    const sequence = i + 4;
    if (res.status === 200) accepted.add(sequence);
    else expect([409, res.json.error]).toEqual([409, expect.stringMatching(/^(run_closed|after_terminal|terminal_not_last)$/)]);
  });
  if (!accepted.has(4)) {
    // Later events got in first, so the terminal was refused: the runtime fills 4 and ends after them.
    expect((await runs.postEvent(runId, event(1, 4))).status).toBe(200);
    const last = Math.max(4, ...accepted);
    expect((await runs.postEvent(runId, event(1, last + 1, 'terminal'))).status).toBe(200);
    for (let sequence = 5; sequence <= last; sequence++) accepted.add(sequence);
    accepted.add(last + 1);
  }
  accepted.add(4);
  const done = await runResult(stack, organizationId, runId);
  expect(done).toMatchObject({ status: 'succeeded', ignoredEvents: { afterClose: 0, overflow: 0 } });
  // Every 200 is in the log, and nothing else.
  expect(await sequencesOf(runId)).toEqual([1, 2, 3, ...[...accepted].sort((a, b) => a - b)]);
  // After the close, a report is refused, except the same completion repeated.
  expect(await runs.postEvent(runId, event(1, 99))).toMatchObject({ status: 409, json: { error: 'run_closed', status: 'succeeded' } });
});

it("a run's events end at its terminal: 409 after_terminal past a buffered terminal, 409 terminal_not_last below a held sequence", async () => {
  const runId = newRunId();
  for (const body of [event(1, 1), event(1, 4, 'terminal')]) expect((await runs.postEvent(runId, body)).status).toBe(200);
  expect(await runs.postEvent(runId, event(1, 5))).toMatchObject({ status: 409, json: { error: 'after_terminal', terminalSequence: 4 } });
  const ahead = newRunId();
  for (const body of [event(1, 1), event(1, 5)]) expect((await runs.postEvent(ahead, body)).status).toBe(200);
  expect(await runs.postEvent(ahead, event(1, 3, 'terminal'))).toMatchObject({
    status: 409,
    json: { error: 'terminal_not_last', lastSequence: 5 },
  });
  // Filling the gaps ends both runs with exactly what was acked.
  for (const body of [event(1, 2), event(1, 3)]) expect((await runs.postEvent(runId, body)).status).toBe(200);
  expect(await runResult(stack, organizationId, runId)).toMatchObject({ status: 'succeeded', eventCount: 4 });
  expect(await sequencesOf(runId)).toEqual([1, 2, 3, 4]);
});

it('a run live across the deploy takes events as signals (the old way) and then as Updates, in one order', async () => {
  const runId = newRunId();
  expect((await runs.postEvent(runId, event(1, 1))).status).toBe(200);
  // What an API from before the Update sent: the event as a signal.
  const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId));
  await handle.signal(runEventSignal, { ...event(1, 2), receivedAt: Date.now() });
  expect((await runs.postEvent(runId, event(1, 3, 'terminal'))).status).toBe(200);
  expect(await runResult(stack, organizationId, runId)).toMatchObject({ status: 'succeeded', eventCount: 3 });
  expect(await sequencesOf(runId)).toEqual([1, 2, 3]);
});

it('a run is closed in its row only once its history holds the close: the closing write is an activity the history scheduled', async () => {
  // A local activity writes inside the workflow task; the server may refuse that task
  // (UnhandledCommand), dropping the closing Update while the row would already say closed.
  const runId = newRunId();
  expect((await runs.postEvent(runId, event(1, 1))).status).toBe(200);
  expect((await runs.postEvent(runId, event(1, 2, 'terminal'))).status).toBe(200);
  expect(await runResult(stack, organizationId, runId)).toMatchObject({ status: 'succeeded' });
  const history = await stack.services.temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId)).fetchHistory();
  const events = history.events ?? [];
  const terminalAt = events.findIndex((e) =>
    e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.args?.payloads?.some((p) =>
      Buffer.from(p.data ?? [])
        .toString()
        .includes('"sequence":2'),
    ),
  );
  expect(terminalAt).toBeGreaterThan(0);
  const closingWrites = events.flatMap((e, index) => {
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name !== 'persistRunState') return [];
    const input = JSON.parse(Buffer.from(scheduled.input!.payloads![0]!.data!).toString()) as { summary: { status: string } };
    return input.summary.status === 'succeeded' ? [index] : [];
  });
  expect(closingWrites.length).toBeGreaterThanOrEqual(1);
  expect(closingWrites[0]).toBeGreaterThan(terminalAt);
});
