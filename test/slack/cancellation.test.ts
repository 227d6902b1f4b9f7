/**
 * An operator cancels a Slack event (issue #17): with a run child in flight, the cancel reaches
 * the child, which closes `cancelled`; while it waits for a link, the pending row is cleared. In
 * both cases the member's slot is released out of the cancel's reach and no workflow task fails.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { runWorkflowId } from '../../src/runs/contract';
import { slackEventStateQuery, slackEventWorkflowId, type SlackEventState } from '../../src/slack/contract';
import { createTestOrg } from '../harness/identity';
import {
  appMention,
  createTestSlackConnection,
  eventEnvelope,
  linkTokenFrom,
  newSlackUserId,
  postSlackEvent,
  postSlashCommand,
  startFakeSlack,
  type FakeSlack,
  type TestSlackConnection,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let stack: TestStack;
let slack: FakeSlack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
let connection: TestSlackConnection;
beforeAll(async () => {
  slack = await startFakeSlack();
  stack = await startTestStack({ worker: true, env: { SLACK_API_BASE_URL: slack.url } });
  org = await createTestOrg(stack.services.database.db);
  connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId);
});
afterAll(async () => {
  await stack.stop();
  await slack.close();
});

async function mention(slackUserId: string) {
  const envelope = eventEnvelope(connection, appMention(slackUserId, 'cancel me'));
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  return stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
}

const stateOf = (handle: WorkflowHandle, status: SlackEventState['status']) =>
  waitFor(async () => {
    const state = await handle.query(slackEventStateQuery);
    return state.status === status ? state : undefined;
  }, 15_000, { what: status });

const taskFailures = async (handle: WorkflowHandle) =>
  ((await handle.fetchHistory()).events ?? []).filter((e) => e.workflowTaskFailedEventAttributes).length;

it('cancelling a Slack event with a running run child closes both cancelled and releases the member slot', async () => {
  const member = await org.addMember('member');
  const slackUserId = newSlackUserId();
  const command = await postSlashCommand(stack, connection, { user_id: slackUserId });
  const linked = await stack.request('POST', `/v1/integrations/slack/${connection.connectionId}/account-links`, {
    headers: member.headers,
    body: { token: linkTokenFrom(command.json.text) },
  });
  expect(linked.status).toBe(201);
  const handle = await mention(slackUserId);
  const created = await stateOf(handle, 'run_created');
  const child = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, created.runId!));
  // A runtime finds the run in the list once its row exists, then claims it.
  await waitFor(async () =>
    (await stack.request('GET', '/v1/automation-runs?status=queued', { headers: member.headers })).json.runs.some((r: { id: string }) => r.id === created.runId),
  );
  expect((await stack.request('POST', `/v1/automation-runs/${created.runId}/claim`, { headers: member.headers })).status).toBe(200);

  await handle.cancel();
  expect(await handle.result()).toMatchObject({ status: 'cancelled', runId: created.runId });
  expect(await child.result()).toMatchObject({ status: 'cancelled' });
  const slot = await stack.services.database.db
    .selectFrom('slack_member_invocations')
    .select('ended_at')
    .where('run_id', '=', created.runId!)
    .executeTakeFirstOrThrow();
  expect(slot.ended_at).not.toBeNull();
  expect(await taskFailures(handle)).toBe(0);
  expect(await taskFailures(child)).toBe(0);
});

it('cancelling a Slack event that waits for a link clears its pending row', async () => {
  const handle = await mention(newSlackUserId());
  await stateOf(handle, 'awaiting_link');
  await handle.cancel();
  expect(await handle.result()).toMatchObject({ status: 'cancelled' });
  const pending = await stack.services.database.db
    .selectFrom('slack_pending_invocations')
    .select('event_id')
    .where('workflow_id', '=', handle.workflowId)
    .execute();
  expect(pending).toEqual([]);
  expect(await taskFailures(handle)).toBe(0);
});
