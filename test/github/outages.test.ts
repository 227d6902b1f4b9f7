/**
 * The webhook when its secret or Temporal is missing: 503, so the operator redelivers later. When
 * only Postgres is refusing writes, a delivery is still started and acked: Temporal holds it. When
 * Postgres cannot be reached at all, whether a push has a target cannot be told: it is accepted
 * durably all the same.
 */
import { randomUUID } from 'node:crypto';
import { githubDeliveryWorkflowId } from '../../src/github/contract';
import { deliver, freshId, githubExample, pushWithTarget } from '../harness/github';
import { createTestOrg } from '../harness/identity';
import { closedPort } from '../harness/ports';
import { startTestStack } from '../harness/stack';

const SECRET = `secret-${randomUUID()}`;

function push() {
  const payload = githubExample('push', (p) => p.ref === 'refs/heads/master' && p.installation);
  payload.installation.id = freshId();
  payload.repository.id = freshId();
  return payload;
}

describe('GitHub webhook outages', () => {
  it('GITHUB_WEBHOOK_SECRET unset → 503 webhook secret not configured', async () => {
    const stack = await startTestStack({ env: { GITHUB_WEBHOOK_SECRET: '', GITHUB_WEBHOOK_SECRET_PREVIOUS: SECRET } });
    try {
      const res = await deliver(stack, { event: 'push', payload: push(), secret: SECRET });
      expect(res.status).toBe(503);
      expect(res.json).toEqual({ ok: false, error: 'webhook secret not configured' });
      const alias = await deliver(stack, {
        path: '/v1/webhooks/connectors/codehost',
        event: 'ping',
        payload: githubExample('ping'),
        secret: SECRET,
      });
      expect(alias.status).toBe(503);
      expect(alias.json).toEqual({ ok: false, error: 'webhook secret not configured' });
    } finally {
      await stack.stop();
    }
  });

  it('Temporal unreachable → 503 for an accepted delivery, never a 202; ping still answers', async () => {
    const stack = await startTestStack({
      env: { GITHUB_WEBHOOK_SECRET: SECRET, TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`, TEMPORAL_START_TIMEOUT: '1s' },
    });
    try {
      const matched = await pushWithTarget(stack.services.database.db, (await createTestOrg(stack.services.database.db)).organizationId);
      const res = await deliver(stack, { event: 'push', payload: matched, secret: SECRET });
      expect(res.status).toBe(503);
      expect(res.json).toMatchObject({ error: 'unavailable', dependency: 'temporal' });
      expect(res.headers.get('retry-after')).toBe('5');

      const ping = await deliver(stack, { event: 'ping', payload: githubExample('ping'), secret: SECRET });
      expect(ping.status).toBe(200);
      expect(ping.json).toEqual({ ok: true, accepted: false, reason: 'ping' });
    } finally {
      await stack.stop();
    }
  });

  it('Postgres refusing writes → the body digest is skipped, and the delivery is still started and acked 202', async () => {
    const base = await startTestStack();
    const url = new URL(base.config.database.url!);
    const matched = await pushWithTarget(base.services.database.db, (await createTestOrg(base.services.database.db)).organizationId);
    await base.stop();
    // Reads answer and writes are refused (SQLSTATE 25006), as after a failover to a replica.
    url.searchParams.set('options', '-c default_transaction_read_only=on');
    const stack = await startTestStack({ env: { GITHUB_WEBHOOK_SECRET: SECRET, DATABASE_URL: url.toString() } });
    try {
      const deliveryId = randomUUID();
      const res = await deliver(stack, { event: 'push', payload: matched, secret: SECRET, deliveryId });
      expect(res.status).toBe(202);
      expect(res.json).toMatchObject({ ok: true, accepted: true, deliveryId });
      const started = await stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId)).describe();
      expect(started.workflowId).toBe(githubDeliveryWorkflowId(deliveryId));
      expect(stack.logs.some((line) => String(line.msg).includes('replay check skipped'))).toBe(true);
    } finally {
      await stack.stop();
    }
  });

  it('Postgres unreachable → a push whose targets cannot be looked up is accepted durably (202), as before the check', async () => {
    const stack = await startTestStack({
      env: { GITHUB_WEBHOOK_SECRET: SECRET, DATABASE_URL: `postgres://den:den@127.0.0.1:${await closedPort()}/den` },
    });
    try {
      const deliveryId = randomUUID();
      const res = await deliver(stack, { event: 'push', payload: push(), secret: SECRET, deliveryId });
      expect(res.status).toBe(202);
      expect(res.json).toMatchObject({ ok: true, accepted: true, deliveryId, queued: true });
      const started = await stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId)).describe();
      expect(started.workflowId).toBe(githubDeliveryWorkflowId(deliveryId));
      await stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId)).terminate('test: no database');
    } finally {
      await stack.stop();
    }
  });
});
