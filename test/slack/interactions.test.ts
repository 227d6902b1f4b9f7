/**
 * Stopping a run from Slack, over real HTTP: the Cancel button's interactions route (its checks
 * answer like the other Slack routes'), and `/den cancel`, `/den status`, `/den help`.
 */
import { randomUUID } from 'node:crypto';
import { runWorkflowId } from '../../src/runs/contract';
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { CANCEL_ACTION_ID } from '../../src/slack/progress';
import { HELP_TEXT } from '../../src/slack/texts';
import type { TestMember } from '../harness/identity';
import {
  appMention,
  blockActions,
  createTestSlackConnection,
  eventEnvelope,
  linkSlackUser,
  newSlackUserId,
  postInteraction,
  postSlackEvent,
  postSlashCommand,
  slackSignatureHeaders,
  startSlackLoop,
  type FakeSlack,
  type TestSlackConnection,
} from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
let slack: FakeSlack;
let connection: TestSlackConnection;

beforeAll(async () => {
  loop = await startSlackLoop();
  ({ stack, slack, connection } = loop);
});
afterAll(() => loop.stop());

/** A linked member's mention, routed to a queued run; resolves with the run and the Slack user. */
async function invocation(member?: TestMember) {
  const owner = member ?? (await loop.org.addMember('member'));
  const slackUserId = await linkSlackUser(stack, connection, owner);
  const mention = appMention(slackUserId, 'take your time');
  const envelope = eventEnvelope(connection, mention);
  expect((await postSlackEvent(stack, connection, envelope)).status).toBe(200);
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
  const state = await waitFor(
    async () => {
      const s = await handle.query(slackEventStateQuery);
      return s.status === 'run_created' ? s : undefined;
    },
    15_000,
    { what: 'run_created' },
  );
  const run = stack.services.temporal.client.workflow.getHandle(runWorkflowId(loop.org.organizationId, state.runId!));
  await waitFor(() => run.describe(), 10_000, { what: 'the run child workflow' });
  return { owner, slackUserId, mention, handle, run, runId: state.runId! };
}

const ephemeralTo = (user: string, after: number) =>
  slack.waitForCall('chat.postEphemeral', (c) => c.body.user === user && c.at >= after, 10_000);

describe.each(['slack', 'chatplatform'] as const)('POST /v1/integrations/%s/{connectionId}/interactions', (provider) => {
  const url = (id: string) => `/v1/integrations/${provider}/${id}/interactions`;
  const click = (user: string, value = 'run-x') => blockActions(connection, { user, actionId: CANCEL_ACTION_ID, value });

  it('400 InvalidRequestError for a bad connectionId', async () => {
    const raw = new URLSearchParams({ payload: '{}' }).toString();
    const res = await stack.request('POST', url('emc_nope'), {
      raw,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...slackSignatureHeaders('x', raw) },
    });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_request');
  });

  it('400 for a signed form without a JSON payload', async () => {
    // Each body is this provider's own: the same bytes signed in the same second would be a replay (401).
    for (const form of ['token=x', 'payload=not-json', `payload=${encodeURIComponent('{"type":"block_actions"}')}`]) {
      const raw = `${form}&nonce=${provider}`;
      const res = await postInteraction(stack, connection, null, { provider, raw });
      expect(res.status).toBe(400);
      expect(res.json.error).toBe('invalid_request');
    }
  });

  it('401 {ok:false} for an unknown installation, a bad signature and a replay', async () => {
    const unknown = { ...connection, connectionId: `emc_${'0'.repeat(26)}` };
    expect((await postInteraction(stack, unknown, click(newSlackUserId()), { provider })).status).toBe(401);
    const forged = await postInteraction(stack, { ...connection, signingSecret: 'wrong' }, click(newSlackUserId()), { provider });
    expect(forged.status).toBe(401);
    expect(forged.json).toEqual({ ok: false });
    const raw = new URLSearchParams({ payload: JSON.stringify(blockActions(connection, { user: 'U1', actionId: 'other', value: 'v' })) });
    const headers = slackSignatureHeaders(connection.signingSecret, raw.toString());
    expect((await postInteraction(stack, connection, null, { provider, raw: raw.toString(), headers })).status).toBe(200);
    expect((await postInteraction(stack, connection, null, { provider, raw: raw.toString(), headers })).status).toBe(401);
  });

  it('403 {ok:false} when team or app differ from the installation', async () => {
    const payload = { ...click(newSlackUserId()), team: { id: 'TOTHER' } };
    const res = await postInteraction(stack, connection, payload, { provider });
    expect(res.status).toBe(403);
    expect(res.json).toEqual({ ok: false });
    expect((await postInteraction(stack, connection, { ...click(newSlackUserId()), api_app_id: undefined }, { provider })).status).toBe(
      403,
    );
  });

  it('413 for a body over the limit', async () => {
    const raw = `payload=${'x'.repeat(100_001)}`;
    const res = await postInteraction(stack, connection, null, { provider, raw });
    expect(res.status).toBe(413);
  });

  it('200 with an empty body for an action that is not ours, and nothing else happens', async () => {
    const user = newSlackUserId();
    const res = await postInteraction(stack, connection, blockActions(connection, { user, actionId: 'something_else', value: 'v' }), {
      provider,
    });
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(slack.calls.filter((c) => c.body.user === user)).toEqual([]);
  });
});

describe('the Cancel button', () => {
  it("another Slack user's click gets an ephemeral refusal and changes nothing", async () => {
    const { runId, run, mention } = await invocation();
    const stranger = await loop.org.addMember('member');
    const strangerSlack = await linkSlackUser(stack, connection, stranger);
    const before = Date.now();
    const started = Date.now();
    const res = await postInteraction(
      stack,
      connection,
      blockActions(connection, { user: strangerSlack, actionId: CANCEL_ACTION_ID, value: runId, threadTs: mention.ts }),
    );
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(3000);
    const refusal = await ephemeralTo(strangerSlack, before);
    expect(refusal.body).toMatchObject({ channel: 'C0TESTCHAN', user: strangerSlack, thread_ts: mention.ts });
    expect(refusal.body.text).toMatch(/Only the member who asked, or an admin/);
    // The run never heard of it: no Update in its history, still queued.
    const history = await run.fetchHistory();
    expect((history.events ?? []).some((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toBe(false);
    expect((await run.describe()).status.name).toBe('RUNNING');
    await run.terminate('test done');
  });

  it("an unlinked Slack user is told to connect first; a run id that is not this connection's is refused", async () => {
    const user = newSlackUserId();
    const before = Date.now();
    await postInteraction(stack, connection, blockActions(connection, { user, actionId: CANCEL_ACTION_ID, value: randomUUID() }));
    expect((await ephemeralTo(user, before)).body.text).toMatch(/Connect your Slack account/);
    const member = await loop.org.addMember('member');
    const linked = await linkSlackUser(stack, connection, member);
    const again = Date.now();
    await postInteraction(stack, connection, blockActions(connection, { user: linked, actionId: CANCEL_ACTION_ID, value: randomUUID() }));
    expect((await ephemeralTo(linked, again)).body.text).toMatch(/Only the member who asked/);
  });

  it("the run's member's click reaches the run (and is not refused)", async () => {
    const { runId, run, slackUserId } = await invocation();
    const before = Date.now();
    const res = await postInteraction(
      stack,
      connection,
      blockActions(connection, { user: slackUserId, actionId: CANCEL_ACTION_ID, value: runId }),
    );
    expect(res.status).toBe(200);
    const answer = await ephemeralTo(slackUserId, before);
    expect(answer.body.text).not.toMatch(/Only the member who asked/);
    expect(answer.body.text).toMatch(/Cancelling the run/);
    expect(await run.result()).toMatchObject({ status: 'cancelled' });
  });

  it("an admin of the organization may cancel another member's run, by their linked Slack user", async () => {
    const { runId, run } = await invocation();
    const admin = await loop.org.addMember('admin');
    const adminSlack = await linkSlackUser(stack, connection, admin);
    const before = Date.now();
    await postInteraction(stack, connection, blockActions(connection, { user: adminSlack, actionId: CANCEL_ACTION_ID, value: runId }));
    const answer = await ephemeralTo(adminSlack, before);
    expect(answer.body.text).not.toMatch(/Only the member who asked/);
    expect(answer.body.text).toMatch(/Cancelling the run/);
    expect(await run.result()).toMatchObject({ status: 'cancelled' });
  });

  it("the member's click cancels the queued run, and the message says so", async () => {
    const { runId, handle, slackUserId, mention } = await invocation();
    await postInteraction(stack, connection, blockActions(connection, { user: slackUserId, actionId: CANCEL_ACTION_ID, value: runId }));
    expect(await handle.result()).toMatchObject({ status: 'cancelled', runStatus: 'cancelled' });
    const message = slack.messages.find((m) => m.thread_ts === mention.ts);
    expect(message?.text).toMatch(/cancelled/);
  });
});

describe('/den cancel, /den status, /den help', () => {
  const command = (user: string, text: string) => postSlashCommand(stack, connection, { user_id: user, text });

  it('/den help lists the commands; /den alone is still the connect link', async () => {
    const user = newSlackUserId();
    const help = await command(user, 'help');
    expect(help.json).toEqual({ response_type: 'ephemeral', text: HELP_TEXT });
    for (const sub of ['/den status', '/den cancel', '/den help']) expect(help.json.text).toContain(sub);
    expect((await command(user, '')).json.text).toMatch(/\|Connect your account>/);
  });

  it('/den status answers with the caller’s active runs: status, age and where it was asked', async () => {
    const { runId, run, slackUserId, mention } = await invocation();
    const res = await command(slackUserId, 'status');
    expect(res.status).toBe(200);
    expect(res.json.response_type).toBe('ephemeral');
    expect(res.json.text).toContain(runId);
    expect(res.json.text).toMatch(/queued, asked under a minute ago/);
    expect(res.json.text).toContain(`<#${mention.channel}>`);
    // Someone else's status does not show it.
    const other = await linkSlackUser(stack, connection, await loop.org.addMember('member'));
    expect((await command(other, 'status')).json.text).toBe('You have no den request running.');
    await run.terminate('test done');
  });

  it('/den cancel with nothing running says so; unlinked users are told to connect', async () => {
    const member = await loop.org.addMember('member');
    const linked = await linkSlackUser(stack, connection, member);
    expect((await command(linked, 'cancel')).json.text).toBe('You have no den request running.');
    expect((await command(newSlackUserId(), 'cancel')).json.text).toMatch(/Connect your Slack account/);
    expect((await command(newSlackUserId(), 'status')).json.text).toMatch(/Connect your Slack account/);
  });

  it("/den cancel reaches the caller's newest active run", async () => {
    const { run, slackUserId } = await invocation();
    const res = await command(slackUserId, 'cancel');
    expect(res.status).toBe(200);
    expect(res.json.text).toMatch(/Cancelling the run/);
    expect(await run.result()).toMatchObject({ status: 'cancelled' });
  });
});

it('a connection of another workspace cannot reach these runs', async () => {
  const other = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, loop.org.organizationId, {
    slack: loop.slack,
  });
  const { runId, run, slackUserId } = await invocation();
  const before = Date.now();
  await postInteraction(stack, other, blockActions(other, { user: slackUserId, actionId: CANCEL_ACTION_ID, value: runId }));
  // The user is not linked on that connection: refused before any run is looked at.
  expect((await ephemeralTo(slackUserId, before)).body.text).toMatch(/Connect your Slack account/);
  expect((await run.describe()).status.name).toBe('RUNNING');
  await run.terminate('test done');
});
