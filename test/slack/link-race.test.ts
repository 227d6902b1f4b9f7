/**
 * The link decision reads the recorded link, not how the wait ended. A link that
 * arrives after the wait's timer fired, while the pending row is being cleared, must still route
 * the invocation; deciding on the timer's result ended it `link_expired` although the link
 * succeeded. The test makes that window wide and certain: it holds a lock on the pending row,
 * so the clean-up blocks after the timer fired, and the link's signal lands meanwhile.
 */
import { slackAccountLinkedSignal, slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { createTestOrg } from '../harness/identity';
import { appMention, createTestSlackConnection, eventEnvelope, newSlackUserId, postSlackEvent, startFakeSlack } from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let stack: TestStack;
let slack: Awaited<ReturnType<typeof startFakeSlack>>;
beforeAll(async () => {
  slack = await startFakeSlack();
  stack = await startTestStack({ worker: true, env: { SLACK_API_BASE_URL: slack.url, SLACK_LINK_WAIT: '1s' } });
});
afterAll(async () => {
  await stack.stop();
  await slack.close();
});

it('a link that lands while the pending row is being cleared, after the wait timed out, routes the invocation', async () => {
  const db = stack.services.database.db;
  const org = await createTestOrg(db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(db, stack.services.secretKey, org.organizationId, { slack });
  const slackUserId = newSlackUserId();
  const envelope = eventEnvelope(connection, appMention(slackUserId, 'race me'));
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));

  // Hold the pending row from the moment the workflow writes it.
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  await waitFor(async () => (await handle.query(slackEventStateQuery)).status === 'awaiting_link');
  const holder = db.transaction().execute(async (trx) => {
    await trx.selectFrom('slack_pending_invocations').selectAll().where('workflow_id', '=', handle.workflowId).forUpdate().execute();
    locked();
    await released;
  });
  await isLocked;

  // The 1 s wait times out; the clean-up now blocks on the lock. Then the link lands.
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  await handle.signal(slackAccountLinkedSignal, { slackUserId, organizationId: org.organizationId, memberId: member.memberId });
  await new Promise((resolve) => setTimeout(resolve, 500));
  release();
  await holder;

  const state = await waitFor(
    async () => {
      const s = await handle.query(slackEventStateQuery);
      return ['run_created', 'link_expired'].includes(s.status) ? s : undefined;
    },
    15_000,
    { what: 'the link decision' },
  );
  expect(state).toMatchObject({ status: 'run_created', memberId: member.memberId });
});
