/**
 * A signed GitHub body replayed under new `X-GitHub-Delivery` ids, over real HTTP against a real
 * worker, Temporal and Postgres: 202 and nothing started, on any replica; GitHub's own redelivery
 * (same id, same body) still starts its workflow when the first attempt got a 503.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { githubDeliveryWorkflowId } from '../../src/github/contract';
import { deliver, deliveryResult, pushWithTarget } from '../harness/github';
import { createTestOrg } from '../harness/identity';
import { closedPort } from '../harness/ports';
import { startTestStack, type TestStack } from '../harness/stack';

const SECRET = `secret-${randomUUID()}`;

let stack: TestStack;
let replica: TestStack;
let organizationId: string;

beforeAll(async () => {
  stack = await startTestStack({ worker: true, env: { GITHUB_WEBHOOK_SECRET: SECRET } });
  // A second API replica on the same database and Temporal, without a worker of its own.
  replica = await startTestStack({ env: { GITHUB_WEBHOOK_SECRET: SECRET, TEMPORAL_TASK_QUEUE: stack.config.temporal.taskQueue } });
  organizationId = (await createTestOrg(stack.services.database.db)).organizationId;
});
afterAll(async () => {
  await replica?.stop();
  await stack?.stop();
});

const db = () => stack.services.database.db;

/** A push a target syncs, as the raw bytes GitHub signed. */
const capturedPush = async (): Promise<string> => JSON.stringify(await pushWithTarget(db(), organizationId));

const accepted = (deliveryId: string) => ({ ok: true, accepted: true, event: 'push', deliveryId, queued: true });

async function workflowExists(deliveryId: string): Promise<boolean> {
  try {
    await stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId)).describe();
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

const syncDeliveries = async (raw: string) => {
  const repositoryId = (JSON.parse(raw) as { repository: { id: number } }).repository.id;
  const rows = await db()
    .selectFrom('github_sync_events')
    .select('delivery_id')
    .where('repository_id', '=', String(repositoryId))
    .execute();
  return rows.map((row) => row.delivery_id);
};

describe('GitHub body replays', () => {
  it('the same body under a new delivery id gets 202 and starts no second workflow', async () => {
    const raw = await capturedPush();
    const original = randomUUID();
    expect((await deliver(stack, { event: 'push', deliveryId: original, raw, secret: SECRET })).status).toBe(202);
    await deliveryResult(stack, original);

    for (let i = 0; i < 3; i++) {
      const replayId = randomUUID();
      const replayed = await deliver(stack, { event: 'push', deliveryId: replayId, raw, secret: SECRET });
      expect(replayed.status).toBe(202);
      expect(replayed.json).toEqual(accepted(replayId));
      expect(await workflowExists(replayId)).toBe(false);
    }
    expect(await syncDeliveries(raw)).toEqual([original]);

    // GitHub's redelivery keeps the id and the body: deduped by the workflow id as before.
    const redelivered = await deliver(stack, { event: 'push', deliveryId: original, raw, secret: SECRET });
    expect(redelivered.status).toBe(202);
    expect(redelivered.json).toEqual(accepted(original));
    const history = await stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(original)).fetchHistory();
    expect((history.events ?? []).filter((e) => e.workflowExecutionStartedEventAttributes)).toHaveLength(1);
    expect(await syncDeliveries(raw)).toEqual([original]);

    const metrics = (await stack.request('GET', '/metrics')).text;
    expect(metrics).toMatch(
      /den_ingress_outcomes_total\{route="\/v1\/webhooks\/connectors\/github",outcome="duplicate",reason="push"\} [4-9]/,
    );
  });

  it('two replicas share the digests: one body under two ids at once, on both, starts one workflow', async () => {
    const raw = await capturedPush();
    const ids = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const answers = await Promise.all(
      ids.map((deliveryId, i) => deliver(i % 2 === 0 ? stack : replica, { event: 'push', deliveryId, raw, secret: SECRET })),
    );
    answers.forEach((res, i) => {
      expect(res.status).toBe(202);
      expect(res.json).toEqual(accepted(ids[i]!));
    });
    const started = [];
    for (const deliveryId of ids) if (await workflowExists(deliveryId)) started.push(deliveryId);
    expect(started).toHaveLength(1);
    await deliveryResult(stack, started[0]!);
    expect(await syncDeliveries(raw)).toEqual(started);
  });

  it('a 503 while Temporal is down is still retried by a redelivery of the same id, and a replay meanwhile starts nothing', async () => {
    const down = await startTestStack({
      env: { GITHUB_WEBHOOK_SECRET: SECRET, TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`, TEMPORAL_START_TIMEOUT: '1s' },
    });
    try {
      const raw = await capturedPush();
      const original = randomUUID();
      const refused = await deliver(down, { event: 'push', deliveryId: original, raw, secret: SECRET });
      expect(refused.status).toBe(503);
      expect(refused.json).toMatchObject({ error: 'unavailable', dependency: 'temporal' });

      const replayId = randomUUID();
      expect((await deliver(replica, { event: 'push', deliveryId: replayId, raw, secret: SECRET })).status).toBe(202);
      expect(await workflowExists(replayId)).toBe(false);

      const redelivered = await deliver(replica, { event: 'push', deliveryId: original, raw, secret: SECRET });
      expect(redelivered.status).toBe(202);
      expect(redelivered.json).toEqual(accepted(original));
      await deliveryResult(stack, original);
      expect(await syncDeliveries(raw)).toEqual([original]);
    } finally {
      await down.stop();
    }
  });
});
