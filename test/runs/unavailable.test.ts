/**
 * Temporal unreachable (TEMPORAL_ADDRESS is a closed port; Postgres is fine): reports are 503,
 * never 200, and a heartbeat that could not be forwarded is not coalesced away.
 */
import { closedPort } from '../harness/ports';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

describe('automation runs while Temporal is unreachable', () => {
  let stack: TestStack;
  let runs: ReturnType<typeof runsClient>;

  beforeAll(async () => {
    stack = await startTestStack({ env: { TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`, TEMPORAL_START_TIMEOUT: '1s' } });
    const org = await createTestOrg(stack.services.database.db);
    runs = runsClient(stack, org.owner.headers);
  });
  afterAll(() => stack.stop());

  const expect503 = (res: { status: number; json: unknown; headers: Headers }) => {
    expect(res.status).toBe(503);
    expect(res.json).toEqual({ error: 'unavailable', dependency: 'temporal', message: 'temporal is unavailable; retry later.' });
    expect(res.headers.get('retry-after')).toBe('5');
  };

  it('an event report is a 503', async () => {
    expect503(await runs.postEvent(newRunId(), event(1, 1)));
  });

  it('heartbeats are 503 each time: a failed forward is released, not coalesced', async () => {
    const id = newRunId();
    const coalesced = async () =>
      (await stack.services.metrics.heartbeats.get()).values.find((v) => v.labels.result === 'coalesced')?.value ?? 0;
    const before = await coalesced();
    expect503(await runs.heartbeat(id, 1));
    expect503(await runs.heartbeat(id, 1));
    expect(await coalesced()).toBe(before);
  });

  it('reading a run the table does not know is a 503; validation still answers 400', async () => {
    const id = newRunId();
    expect503(await runs.get(id));
    expect503(await runs.events(id));
    const listed = await runs.list();
    expect(listed.status).toBe(200);
    expect(listed.json).toEqual({ runs: [] });
    const invalid = await runs.postEvent(id, { ...event(1, 1), attempt: 0 });
    expect(invalid.status).toBe(400);
    expect(invalid.json.details.map((d: { path: unknown }) => d.path)).toEqual([['attempt']]);
  });
});
