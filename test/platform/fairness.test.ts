/**
 * Fair dispatch per organization, read back from Temporal: every workflow type the service
 * starts carries its organization as fairness key (a child and its activities inherit it), and an
 * organization's weight set with `den` reaches the next start without a restart.
 */
import { randomUUID } from 'node:crypto';
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { githubDeliveryWorkflowId } from '../../src/github/contract';
import { setFairnessWeight } from '../../src/identity/store';
import { runWorkflowId } from '../../src/runs/contract';
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { deliver, freshId, githubExample, pushWithTarget } from '../harness/github';
import { createTestOrg } from '../harness/identity';
import { event, newRunId } from '../harness/runs';
import { appMention, eventEnvelope, linkSlackUser, postSlackEvent, startSlackLoop } from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const GITHUB_SECRET = `gh-${randomUUID()}`;
let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;

beforeAll(async () => {
  loop = await startSlackLoop({
    GITHUB_WEBHOOK_SECRET: GITHUB_SECRET,
    // A weight changed in Postgres is read at the next start.
    TEMPORAL_FAIRNESS_WEIGHT_TTL: '0s',
  });
  stack = loop.stack;
});
afterAll(() => loop?.stop());

const describeWorkflow = (workflowId: string) => stack.services.temporal.client.workflow.getHandle(workflowId).describe();

/** The priority as the server stores it (the SDK's decoded form fills unset fields with zeros). */
function fairnessOf(description: WorkflowExecutionDescription) {
  const priority = description.raw.workflowExecutionInfo?.priority;
  return { key: priority?.fairnessKey ?? '', weight: priority?.fairnessWeight ?? 0 };
}

async function newRun(headers: Record<string, string>): Promise<string> {
  const runId = newRunId();
  const res = await stack.request('POST', `/v1/automation-runs/${runId}/events`, { headers, body: event(1, 1) });
  expect(res.status).toBe(200);
  return runId;
}

describe('fairness keys on every workflow type', () => {
  it('a run started by its first event', async () => {
    const { organizationId, owner } = loop.org;
    const runId = await newRun(owner.headers);
    expect(fairnessOf(await describeWorkflow(runWorkflowId(organizationId, runId)))).toEqual({ key: organizationId, weight: 0 });
  });

  it('a Slack event, and the run it starts as a child (inherited)', async () => {
    const { organizationId, owner } = loop.org;
    const user = await linkSlackUser(stack, loop.connection, owner);
    const envelope = eventEnvelope(loop.connection, appMention(user));
    expect((await postSlackEvent(stack, loop.connection, envelope)).status).toBe(200);
    const workflowId = slackEventWorkflowId(loop.connection.connectionId, envelope.event_id);
    expect(fairnessOf(await describeWorkflow(workflowId)).key).toBe(organizationId);
    const runId = await waitFor(
      async () => (await stack.services.temporal.client.workflow.getHandle(workflowId).query(slackEventStateQuery)).runId ?? undefined,
      15_000,
      { what: "the Slack event's run" },
    );
    const child = await waitFor(() => describeWorkflow(runWorkflowId(organizationId, runId)).catch(() => undefined), 15_000, {
      what: 'the child run to start',
    });
    expect(fairnessOf(child).key).toBe(organizationId);
  });

  it("a GitHub delivery: its target's organization, or the installation when no organization syncs it", async () => {
    const org = await createTestOrg(stack.services.database.db);
    const matched = await pushWithTarget(stack.services.database.db, org.organizationId);
    const deliveryId = randomUUID();
    expect((await deliver(stack, { event: 'push', deliveryId, payload: matched, secret: GITHUB_SECRET })).status).toBe(202);
    expect(fairnessOf(await describeWorkflow(githubDeliveryWorkflowId(deliveryId))).key).toBe(org.organizationId);

    // An installation nobody owns: its lifecycle deliveries are its own tenant (a push there has no target, so it is not accepted).
    const installationId = freshId();
    const unowned = { ...githubExample('installation', (p) => p.action === 'suspend'), installation: { id: installationId } };
    const otherId = randomUUID();
    expect((await deliver(stack, { event: 'installation', deliveryId: otherId, payload: unowned, secret: GITHUB_SECRET })).status).toBe(
      202,
    );
    expect(fairnessOf(await describeWorkflow(githubDeliveryWorkflowId(otherId))).key).toBe(`github-installation:${installationId}`);
  });

  it('an MCP probe', async () => {
    const admin = await loop.org.addMember('admin');
    const since = new Date(Date.now() - 1000).toISOString();
    const res = await stack.request('POST', '/v1/mcp-connections/resolve', { headers: admin.headers, body: { query: 'notion' } });
    expect(res.status).toBe(200);
    const execution = await waitFor(
      async () => {
        for await (const e of stack.services.temporal.client.workflow.list({
          query: `WorkflowType = 'mcpResolve' AND StartTime >= '${since}'`,
        })) {
          return e;
        }
        return undefined;
      },
      15_000,
      { what: 'the MCP resolve workflow to be listed' },
    );
    expect(fairnessOf(await describeWorkflow(execution.workflowId)).key).toBe(loop.org.organizationId);
  });
});

describe('fairness weights', () => {
  it('a weight set in Postgres rides on the next start, and "default" takes it off', async () => {
    const org = await createTestOrg(stack.services.database.db);
    await setFairnessWeight(stack.services.database.db, org.organizationId, 2.5);
    const weighted = await newRun(org.owner.headers);
    expect(fairnessOf(await describeWorkflow(runWorkflowId(org.organizationId, weighted)))).toEqual({
      key: org.organizationId,
      weight: 2.5,
    });
    await setFairnessWeight(stack.services.database.db, org.organizationId, null);
    const plain = await newRun(org.owner.headers);
    expect(fairnessOf(await describeWorkflow(runWorkflowId(org.organizationId, plain)))).toEqual({ key: org.organizationId, weight: 0 });
  });
});
