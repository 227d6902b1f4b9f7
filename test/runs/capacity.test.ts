/**
 * Live-run capacity over the real stack (RUN_CAPACITY=2), on a database of its own so the live
 * count is this file's runs alone:
 * - a first report that would start a run beyond capacity gets 429 `capacity` with Retry-After
 *   (again from memory while the Retry-After lasts), and the live runs keep reporting;
 * - a Slack invocation beyond capacity is acked, its run stays queued, and claims of it get 429
 *   until a live run ends; then a claim takes it.
 */
import { createTestOrg } from '../harness/identity';
import { ownDatabase } from '../harness/own-database';
import { event, newRunId, runsClient } from '../harness/runs';
import {
  appMention,
  createTestSlackConnection,
  eventEnvelope,
  linkSlackUser,
  postSlackEvent,
  startFakeSlack,
  type FakeSlack,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let database: Awaited<ReturnType<typeof ownDatabase>>;
let slack: FakeSlack;
let stack: TestStack;

beforeAll(async () => {
  database = await ownDatabase();
  slack = await startFakeSlack();
  stack = await startTestStack({
    worker: true,
    env: {
      DATABASE_URL: database.url,
      RUN_CAPACITY: '2',
      SLACK_API_BASE_URL: slack.url,
      SLACK_RESPONSE_URL_PREFIX: slack.responseUrl(''),
    },
  });
});
afterAll(async () => {
  await stack?.stop();
  await slack?.close();
  await database?.drop();
});

const refusals = async () => {
  const text = (await stack.request('GET', '/metrics')).text;
  const count = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? 0);
  return {
    capacity: count(/^den_run_capacity_total\{via="report",result="refused"\} (\d+)/m),
    fromMemory: count(/^den_run_heartbeats_total\{result="refused"\} (\d+)/m),
  };
};

function expectCapacity(res: { status: number; json: unknown; headers: Headers }) {
  expect(res.status).toBe(429);
  expect(res.json).toMatchObject({ error: 'rate_limited', reason: 'capacity' });
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
}

describe('at capacity', () => {
  let live: string[];
  let org: Awaited<ReturnType<typeof createTestOrg>>;

  it('refuses a report that would start a run with 429 capacity, while the live runs keep reporting', async () => {
    org = await createTestOrg(stack.services.database.db);
    const runs = runsClient(stack, org.owner.headers);
    live = [newRunId(), newRunId()];
    expect((await runs.heartbeat(live[0]!, 1)).status).toBe(200);
    expect((await runs.postEvent(live[1]!, event(1, 1))).status).toBe(200);
    await runs.waitForStatus(live[1]!, ['running']);
    const before = await refusals();

    const third = newRunId();
    expectCapacity(await runs.heartbeat(third, 1));
    // Asked again within its Retry-After, it is refused from memory, and nothing started it.
    expectCapacity(await runs.heartbeat(third, 1));
    expectCapacity(await runs.postEvent(newRunId(), event(1, 1)));
    expect((await runs.get(third)).status).toBe(404);
    // Two decided by the capacity check, one (the heartbeat asked again) answered from memory.
    const after = await refusals();
    expect(after.capacity - before.capacity).toBe(2);
    expect(after.fromMemory - before.fromMemory).toBe(1);

    // The runs that hold a lease are never refused.
    const again = await runs.heartbeat(live[0]!, 1);
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ leaseValid: true });
    expect((await runs.postEvent(live[1]!, event(1, 2))).status).toBe(200);
  });

  it('acks a Slack invocation beyond capacity; its run stays queued, claims get 429 until a live run ends, then one takes it', async () => {
    const member = await org.addMember('member');
    const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, { slack });
    const user = await linkSlackUser(stack, connection, member);
    const mention = await postSlackEvent(stack, connection, eventEnvelope(connection, appMention(user, 'summarise the thread')));
    expect(mention.status).toBe(200);
    const runs = runsClient(stack, member.headers);
    const queued = await waitFor(async () => (await runs.list('?status=queued')).json?.runs?.[0]?.id as string | undefined, 15_000, {
      what: "the Slack invocation's queued run",
    });

    expectCapacity(await runs.claimNext());
    expectCapacity(await runs.claim(queued));
    expect((await runs.get(queued)).json).toMatchObject({ status: 'queued' });

    // A live run ends: there is room again, and the queued run can be claimed.
    const owner = runsClient(stack, org.owner.headers);
    expect((await owner.postEvent(live[1]!, event(1, 3, 'terminal', { status: 'succeeded' }))).status).toBe(200);
    await owner.waitForStatus(live[1]!, ['succeeded']);
    const claimed = await waitFor(
      async () => {
        const res = await runs.claimNext();
        return res.status === 200 ? res : undefined;
      },
      10_000,
      { what: 'a claim once a live run ended', intervalMs: 300 },
    );
    expect(claimed.json).toMatchObject({ run: { id: queued, status: 'running' }, attempt: 1 });
  });
});
