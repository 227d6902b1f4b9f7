/**
 * An ack means durable, and Slack cannot wait: with Temporal unreachable, a supported event is
 * kept in Postgres and acked within SLACK_EVENT_ACK_WAIT, never refused; once Temporal answers,
 * the worker's sweep starts its workflow, once, however many times Slack delivered it. With
 * Postgres unable to keep it either, the answer is 503 (test/slack/quota.test.ts).
 */
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { startDeferredEvents } from '../../src/slack/deferred-events';
import { createTestOrg } from '../harness/identity';
import { closedPort } from '../harness/ports';
import { appMention, createTestSlackConnection, eventEnvelope, newSlackUserId, postSlackEvent, postSlashCommand } from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';

describe('Slack ingress with Temporal unreachable', () => {
  let stack: TestStack;
  let engine: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`, SLACK_EVENT_ACK_WAIT: '500ms' } });
    // The same database with Temporal reachable: the worker role once Temporal is back.
    engine = await startTestStack({ worker: true });
  });
  afterAll(async () => {
    await stack.stop();
    await engine.stop();
  });

  const sweep = () => startDeferredEvents({ db: engine.services.database.db, ingress: engine.ingress, log: engine.services.log });
  /** Past the hold of the start that was under way, on the database's clock. */
  const due = (...workflowIds: string[]) =>
    engine.services.database.db
      .updateTable('slack_deferred_events')
      .set({ next_attempt_at: new Date(0) })
      .where('workflow_id', 'in', workflowIds)
      .execute();
  const kept = (workflowId: string) =>
    stack.services.database.db.selectFrom('slack_deferred_events').selectAll().where('workflow_id', '=', workflowId).execute();

  it.each(['slack', 'chatplatform'] as const)('keeps a supported event on /%s and acks it, then starts it once', async (provider) => {
    const org = await createTestOrg(stack.services.database.db);
    const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, {
      botToken: null,
    });
    const envelope = eventEnvelope(connection, appMention(newSlackUserId()));
    const workflowId = slackEventWorkflowId(connection.connectionId, envelope.event_id);
    const started = Date.now();
    const res = await postSlackEvent(stack, connection, envelope, { provider });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
    // Within Slack's 3 s: the 500 ms the ack waits for Temporal, then one Postgres write.
    expect(Date.now() - started).toBeLessThan(3000);
    // Slack's retry of it is a duplicate of the kept event.
    expect((await postSlackEvent(stack, connection, envelope, { provider })).json).toEqual({ ok: true });
    expect(await kept(workflowId)).toHaveLength(1);
    expect((await stack.request('GET', '/metrics')).text).toMatch(/outcome="deferred",reason="app_mention"\} [1-9]/);

    // What needs no Temporal still works: the challenge, ineligible events, slash commands.
    const challenge = await postSlackEvent(stack, connection, { type: 'url_verification', challenge: 'c' }, { provider });
    expect(challenge.status).toBe(200);
    expect(challenge.json).toEqual({ challenge: 'c' });
    const bot = await postSlackEvent(stack, connection, eventEnvelope(connection, { ...appMention('U1'), bot_id: 'B1' }), { provider });
    expect(bot.status).toBe(200);
    expect(bot.json).toEqual({ ok: true });
    const command = await postSlashCommand(stack, connection, { user_id: newSlackUserId() }, { provider });
    expect(command.status).toBe(200);
    expect(command.json.response_type).toBe('ephemeral');

    // Temporal is back (the other stack's gateway): a sweep, once the start under way has given up its hold.
    const [row] = await kept(workflowId);
    await due(workflowId);
    expect(await sweep()).toEqual({ started: 1, failed: 0 });
    expect(await kept(workflowId)).toEqual([]);
    const handle = engine.services.temporal.client.workflow.getHandle(workflowId);
    expect((await handle.query(slackEventStateQuery)).status).toMatch(/received|awaiting_link/);
    // A row left behind for a workflow Temporal holds already (its start answered after the ack) goes, and nothing starts twice.
    const runId = (await handle.describe()).runId;
    await engine.services.database.db
      .insertInto('slack_deferred_events')
      .values({ ...row!, input: JSON.stringify(row!.input), next_attempt_at: new Date(0) })
      .execute();
    expect(await sweep()).toEqual({ started: 1, failed: 0 });
    expect(await kept(workflowId)).toEqual([]);
    expect((await handle.describe()).runId).toBe(runId);
    await handle.terminate('test done');
  });

  it('starts each kept event once when two workers sweep at once', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, {
      botToken: null,
    });
    const envelopes = Array.from({ length: 6 }, (_, i) => eventEnvelope(connection, appMention(newSlackUserId(), `kept ${i}`)));
    for (const envelope of envelopes) expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
    const ids = envelopes.map((e) => slackEventWorkflowId(connection.connectionId, e.event_id));
    await due(...ids);
    const [one, two] = await Promise.all([sweep(), sweep()]);
    expect(one.started + two.started).toBe(ids.length);
    expect(one.failed + two.failed).toBe(0);
    const handles = ids.map((id) => engine.services.temporal.client.workflow.getHandle(id));
    for (const handle of handles) expect((await handle.describe()).status.name).toBe('RUNNING');
    await Promise.all(handles.map((h) => h.terminate('test done')));
  });
});
