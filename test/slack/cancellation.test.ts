/**
 * An operator cancels a Slack event: with a run child in flight, the cancel reaches
 * the child, which closes `cancelled`; while it waits for a link, the pending row is cleared. In
 * both cases the member's slot is released out of the cancel's reach and no workflow task fails.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { runWorkflowId } from '../../src/runs/contract';
import { slackEventStateQuery, slackEventWorkflowId, type SlackEventState } from '../../src/slack/contract';
import { appMention, eventEnvelope, linkSlackUser, newSlackUserId, postSlackEvent, startSlackLoop } from '../harness/slack';
import { waitFor } from '../harness/wait';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
beforeAll(async () => {
  loop = await startSlackLoop();
});
afterAll(() => loop.stop());

async function mention(slackUserId: string) {
  const { stack, connection } = loop;
  const envelope = eventEnvelope(connection, appMention(slackUserId, 'cancel me'));
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  return stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
}

const stateOf = (handle: WorkflowHandle, status: SlackEventState['status']) =>
  waitFor(
    async () => {
      const state = await handle.query(slackEventStateQuery);
      return state.status === status ? state : undefined;
    },
    15_000,
    { what: status },
  );

const taskFailures = async (handle: WorkflowHandle) =>
  ((await handle.fetchHistory()).events ?? []).filter((e) => e.workflowTaskFailedEventAttributes).length;

it('cancelling a Slack event with a running run child closes both cancelled and releases the member slot', async () => {
  const { stack, org, connection } = loop;
  const member = await org.addMember('member');
  const handle = await mention(await linkSlackUser(stack, connection, member));
  const created = await stateOf(handle, 'run_created');
  const child = stack.services.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, created.runId!));
  // A runtime finds the run in the list once its row exists, then claims it.
  await waitFor(async () =>
    (await stack.request('GET', '/v1/automation-runs?status=queued', { headers: member.headers })).json.runs.some(
      (r: { id: string }) => r.id === created.runId,
    ),
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
  const pending = await loop.stack.services.database.db
    .selectFrom('slack_pending_invocations')
    .select('event_id')
    .where('workflow_id', '=', handle.workflowId)
    .execute();
  expect(pending).toEqual([]);
  expect(await taskFailures(handle)).toBe(0);
});
