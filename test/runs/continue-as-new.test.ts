/**
 * Continue-as-new with a low threshold (RUN_CONTINUE_AS_NEW_EVENTS=50): 500 events sent
 * by four concurrent senders (so they also arrive out of order and the buffer is carried across executions)
 * lose nothing, and the run really went through many executions.
 */
import { runWorkflowId } from '../../src/runs/contract';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runResult, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

describe('automation run continue-as-new', () => {
  let stack: TestStack;
  let org: Awaited<ReturnType<typeof createTestOrg>>;
  let runs: ReturnType<typeof runsClient>;

  beforeAll(async () => {
    stack = await startTestStack({ worker: true, env: { RUN_CONTINUE_AS_NEW_EVENTS: '50' } });
    org = await createTestOrg(stack.services.database.db);
    runs = runsClient(stack, org.owner.headers);
  });
  afterAll(() => stack.stop());

  /** The run id an execution continued as, if it did. */
  const continuedAs = async (workflowId: string, runId: string): Promise<string | undefined> => {
    const history = await stack.services.temporal.client.workflow.getHandle(workflowId, runId).fetchHistory();
    const events = history.events ?? [];
    return events[events.length - 1]?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
  };

  it('500 events across continue-as-new: nothing lost, nothing doubled, all in order', async () => {
    const id = newRunId();
    const total = 500;
    expect((await runs.postEvent(id, event(1, 1, 'usage', { tokens: 1 }))).status).toBe(200);
    const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, id));
    const firstRunId = (await handle.describe()).runId;

    // Like a runtime: a 503 means "not recorded, retry" (a busy 2-core machine can push a
    // report past TEMPORAL_UPDATE_TIMEOUT while the run continues as new), and a 429 is the
    // organization's admission shedding this burst: retry after its Retry-After. A retry of a
    // report that did land after all is a duplicate, answered 200.
    const send = async (body: ReturnType<typeof event>) => {
      for (let attempt = 1; ; attempt++) {
        const res = await runs.postEvent(id, body);
        if (res.status === 503 && attempt < 5) continue;
        if (res.status === 429 && attempt < 50) {
          await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get('retry-after') ?? '1') * 1000));
          continue;
        }
        expect(res.status).toBe(200);
        return;
      }
    };
    let next = 2;
    const sender = async () => {
      while (next <= total) await send(event(1, next++, 'usage', { tokens: 1 }));
    };
    await Promise.all(Array.from({ length: 4 }, sender));
    // A few duplicates on top (answered 200: the run holds them already), then the terminal.
    for (const sequence of [1, total / 2, total]) await send(event(1, sequence, 'usage', { tokens: 1 }));
    await send(event(1, total + 1, 'terminal'));

    const result = await runResult(stack, org.organizationId, id, 60_000);
    expect(result).toMatchObject({ status: 'succeeded', eventCount: total + 1, usage: { tokens: total } });
    // Duplicates are refused by the Update's validator, so they never reach the history; a
    // signal from before the Update would count here.
    expect(result.ignoredEvents).toMatchObject({ duplicate: 0, overflow: 0 });

    const sequences: number[] = [];
    for (let after = 0; ;) {
      const page = await runs.events(id, `?attempt=1&after=${after}&limit=500`);
      expect(page.status).toBe(200);
      if (page.json.events.length === 0) break;
      for (const e of page.json.events) sequences.push(e.sequence);
      after = sequences[sequences.length - 1]!;
    }
    expect(sequences).toEqual(Array.from({ length: total + 1 }, (_, i) => i + 1));

    // Follow the chain of executions from the first one.
    let executions = 1;
    let runId: string | undefined = firstRunId;
    while (runId !== undefined) {
      runId = await continuedAs(handle.workflowId, runId);
      if (runId !== undefined) executions += 1;
    }
    expect(executions).toBeGreaterThanOrEqual(5);
  }, 90_000);
});
