/**
 * The thread as a conversation, over the real stack with `den runtime --exec` as a child process
 * and the strict fake Slack: a reply without a mention follows up on the conversation (from its
 * asker, or from any linked member on their own runtime), the run gets the thread as its context
 * (`input.context`, and the file DEN_RUN_CONTEXT names) and, for a thread begun without it, what
 * conversations.replies adds (a refusal or a 429 of that call costing only what Slack alone holds),
 * one message that Slack delivers twice makes one run, a follow-up behind a live request of its
 * thread waits and says so, and what is not for the bot starts nothing.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { QUEUED_TEXT } from '../../src/slack/runtime-texts';
import type { TestMember } from '../harness/identity';
import { startScriptRuntime, stopRuntimes, type Spawned } from '../harness/process';
import {
  channelMessage,
  createTestSlackConnection,
  eventEnvelope,
  invocationWorkflowId,
  linkSlackUser,
  newSlackUserId,
  newTs,
  postSlackEvent,
  startSlackLoop,
  type TestSlackConnection,
} from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
const spawned: Spawned[] = [];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-conversation-'));

/**
 * The command every runtime here runs: it answers `answer to <text>`, keeps the context file it was
 * given (by run id), and takes 4 s over a request that says `slowly`.
 */
const SCRIPT = [
  'text=$(cat)',
  `cp "$DEN_RUN_CONTEXT" "${dir}/context-$DEN_RUN_ID.json"`,
  'case "$text" in *slowly*) sleep 4;; esac',
  'printf "answer to %s" "$text"',
].join('\n');

beforeAll(async () => {
  loop = await startSlackLoop({ SLACK_PROGRESS_INTERVAL: '200ms' });
  stack = loop.stack;
});
afterAll(async () => {
  await stopRuntimes(spawned);
  await loop.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A linked member with a runtime of their own claiming runs. */
async function memberWithRuntime(connection: TestSlackConnection): Promise<{ member: TestMember; slackUserId: string }> {
  const member = await loop.org.addMember('member');
  const slackUserId = await linkSlackUser(stack, connection, member);
  await startScriptRuntime({ url: stack.url, apiKey: member.apiKey }, { dir, name: `runtime-${slackUserId}`, text: SCRIPT }, spawned);
  return { member, slackUserId };
}

async function connectionWith(threadFollowUps: 'off' | 'asker' | 'members'): Promise<TestSlackConnection> {
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, loop.org.organizationId, {
    slack: loop.slack,
  });
  const patched = await stack.request('PATCH', `/v1/integrations/slack/connections/${connection.connectionId}`, {
    headers: loop.org.owner.headers,
    body: { threadFollowUps },
  });
  expect(patched.status).toBe(200);
  expect(patched.json.threadFollowUps).toBe(threadFollowUps);
  return connection;
}

const mentionBy = (connection: TestSlackConnection, user: string, text: string, channel = 'C0CONVO') => {
  const ts = newTs();
  return { type: 'app_mention', user, text: `<@${connection.botUserId}> ${text}`, ts, channel, event_ts: ts, team: connection.teamId };
};

async function send(connection: TestSlackConnection, event: Record<string, unknown>): Promise<string> {
  const envelope = eventEnvelope(connection, event);
  const res = await postSlackEvent(stack, connection, envelope);
  expect(res.status).toBe(200);
  expect(res.json).toEqual({ ok: true });
  return envelope.event_id;
}

/** Why the route acknowledged an event without routing it (its debug line). */
const notRouted = (eventId: string) =>
  waitFor(() => stack.logs.find((line) => line.msg === 'slack event not routed' && line.eventId === eventId)?.reason as string, 10_000, {
    what: `the event ${eventId} acknowledged and not routed`,
  });

const answered = (threadTs: string, text: string) =>
  waitFor(() => loop.slack.messages.find((m) => m.thread_ts === threadTs && m.text.includes(text)), 60_000, {
    what: `"${text}" in the thread`,
  });

const runsOf = async (member: TestMember) => (await stack.request('GET', '/v1/automation-runs', { headers: member.headers })).json.runs;

it('with `asker`, a reply without a mention by the asker runs in the thread, with the thread as its context and DEN_RUN_CONTEXT', async () => {
  const connection = await connectionWith('asker');
  const { member, slackUserId } = await memberWithRuntime(connection);
  const mention = mentionBy(connection, slackUserId, 'deploy staging');
  await send(connection, mention);
  await answered(mention.ts, 'answer to deploy staging');

  const followUp = channelMessage(slackUserId, 'and prod too', {
    channel: mention.channel,
    thread: { ts: mention.ts, parentUserId: slackUserId },
  });
  await send(connection, followUp);
  await answered(mention.ts, 'answer to and prod too');

  const [second, first] = await runsOf(member);
  expect(first.input).toEqual({ text: 'deploy staging' });
  const context = [
    { userId: slackUserId, bot: false, text: 'deploy staging', ts: mention.ts },
    { userId: null, bot: true, text: 'answer to deploy staging', ts: expect.any(String) },
  ];
  expect(second.input).toEqual({ text: 'and prod too', context });
  expect(second.origin).toMatchObject({ channelId: mention.channel, threadTs: mention.ts, userId: slackUserId });
  // GET /v1/automation-runs/{id} shows it, and the command read it from the file DEN_RUN_CONTEXT named.
  expect((await stack.request('GET', `/v1/automation-runs/${second.id}`, { headers: member.headers })).json.input.context).toEqual(context);
  expect(JSON.parse(fs.readFileSync(path.join(dir, `context-${second.id}.json`), 'utf8'))).toEqual({
    input: { text: 'and prod too' },
    context,
  });
  expect(JSON.parse(fs.readFileSync(path.join(dir, `context-${first.id}.json`), 'utf8'))).toEqual({
    input: { text: 'deploy staging' },
    context: [],
  });
}, 150_000);

it('a reply without a mention by another linked member is not for the bot, with the default setting and with `asker`', async () => {
  const byDefault = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, loop.org.organizationId, {
    slack: loop.slack,
  });
  const asker = await connectionWith('asker');
  for (const connection of [byDefault, asker]) {
    const { slackUserId } = await memberWithRuntime(connection);
    const other = await loop.org.addMember('member');
    const otherUser = await linkSlackUser(stack, connection, other);
    const mention = mentionBy(connection, slackUserId, 'check the build');
    await send(connection, mention);
    await answered(mention.ts, 'answer to check the build');
    const reply = channelMessage(otherUser, 'what about the docs?', {
      channel: mention.channel,
      thread: { ts: mention.ts, parentUserId: slackUserId },
    });
    expect(await notRouted(await send(connection, reply))).toBe(connection === asker ? 'not_asker' : 'follow_ups_off');
    expect(await runsOf(other)).toEqual([]);
  }
}, 150_000);

it('an app_mention and a message event for the same message, sent together, make one run', async () => {
  const connection = await connectionWith('members');
  const { member, slackUserId } = await memberWithRuntime(connection);
  for (let round = 0; round < 4; round++) {
    const mention = mentionBy(connection, slackUserId, `once please ${round}`);
    const message = { ...channelMessage(slackUserId, mention.text, { channel: mention.channel }), ts: mention.ts, event_ts: mention.ts };
    // Either may arrive first; Slack gives the two different event ids.
    const pair = round % 2 === 0 ? [mention, message] : [message, mention];
    await Promise.all(pair.map((event) => send(connection, event)));
    await answered(mention.ts, `answer to once please ${round}`);
    // One workflow for the message, whichever event started it, and it answered.
    const handle = stack.services.temporal.client.workflow.getHandle(invocationWorkflowId(connection.connectionId, mention));
    expect((await handle.result()).status).toBe('replied');
  }
  const runs = await runsOf(member);
  expect(runs.map((r: { input: { text: string } }) => r.input.text).sort()).toEqual([0, 1, 2, 3].map((i) => `once please ${i}`));
  expect(loop.slack.messages.filter((m) => m.text.includes('answer to once please 0'))).toHaveLength(1);
}, 150_000);

it('under `members`, another member’s follow-up runs on their own runtime; one that mentions someone else is not for the bot', async () => {
  const connection = await connectionWith('members');
  const asker = await memberWithRuntime(connection);
  const colleague = await memberWithRuntime(connection);
  const mention = mentionBy(connection, asker.slackUserId, 'list the flaky tests');
  await send(connection, mention);
  await answered(mention.ts, 'answer to list the flaky tests');
  const thread = { ts: mention.ts, parentUserId: asker.slackUserId };

  const aside = channelMessage(colleague.slackUserId, `<@${asker.slackUserId}> I can take the first one`, {
    channel: mention.channel,
    thread,
  });
  expect(await notRouted(await send(connection, aside))).toBe('mentions_other');
  await send(connection, channelMessage(colleague.slackUserId, 'and which are mine?', { channel: mention.channel, thread }));
  await answered(mention.ts, 'answer to and which are mine?');

  const [run] = await runsOf(colleague.member);
  expect(run.memberId).toBe(colleague.member.memberId);
  // Their run reads the conversation: the ask, the answer, and what the colleague said aside.
  expect(run.input.context.map((m: { text: string }) => m.text)).toEqual([
    'list the flaky tests',
    'answer to list the flaky tests',
    `<@${asker.slackUserId}> I can take the first one`,
  ]);
  expect(await runsOf(asker.member)).toHaveLength(1);
}, 150_000);

it('a follow-up while the asker’s run in the thread is live waits, and the thread says it is queued', async () => {
  const connection = await connectionWith('asker');
  const { member, slackUserId } = await memberWithRuntime(connection);
  const mention = mentionBy(connection, slackUserId, 'rebuild slowly');
  await send(connection, mention);
  await waitFor(async () => (await runsOf(member))[0]?.status === 'running', 30_000, { what: 'the first run to be claimed' });
  await send(
    connection,
    channelMessage(slackUserId, 'then tag it', { channel: mention.channel, thread: { ts: mention.ts, parentUserId: slackUserId } }),
  );

  const queued = await waitFor(
    () =>
      loop.slack.messages.find(
        (m) => (m.thread_ts === mention.ts && m.text === QUEUED_TEXT) || m.edits.some((e) => e.text === QUEUED_TEXT),
      ),
    20_000,
    {
      what: 'the queued notice',
    },
  );
  // Nothing of the follow-up runs before the first answer.
  expect((await runsOf(member)).length).toBe(1);
  await answered(mention.ts, 'answer to then tag it');
  const [second, first] = await runsOf(member);
  expect(second.createdAt).toBeGreaterThanOrEqual(first.endedAt);
  // The queued message became the follow-up's own, then its answer's.
  expect(loop.slack.messages.find((m) => m.ts === queued.ts)!.edits.length).toBeGreaterThan(0);
}, 150_000);

it('a follow-up from someone not linked is asked to link once per thread, not once per message', async () => {
  const connection = await connectionWith('members');
  const { slackUserId } = await memberWithRuntime(connection);
  const mention = mentionBy(connection, slackUserId, 'status of the release');
  await send(connection, mention);
  await answered(mention.ts, 'answer to status of the release');
  const stranger = newSlackUserId();
  const thread = { ts: mention.ts, parentUserId: slackUserId };
  for (const text of ['me too', 'and me again'])
    await send(connection, channelMessage(stranger, text, { channel: mention.channel, thread }));
  const prompts = () => loop.slack.calls.filter((c) => c.method === 'chat.postEphemeral' && c.body.user === stranger);
  await waitFor(() => prompts().length > 0, 20_000, { what: 'the connect prompt' });
  // Both follow-ups are held for the link; the second was not prompted again.
  await waitFor(
    async () => {
      const held = await stack.services.database.db
        .selectFrom('slack_pending_invocations')
        .select('event_id')
        .where('slack_user_id', '=', stranger)
        .execute();
      return held.length === 2;
    },
    20_000,
    { what: 'both follow-ups held for the link' },
  );
  expect(prompts()).toHaveLength(1);
  expect(prompts()[0]!.body).toMatchObject({ thread_ts: mention.ts, channel: mention.channel });
}, 150_000);

it('a thread begun before the bot was asked: its messages from conversations.replies; a 429 or a missing scope still runs, on what is held', async () => {
  // Follow-ups off: the service hears only the mentions, so each run of the thread asks Slack for the rest.
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, loop.org.organizationId, {
    slack: loop.slack,
  });
  const { member, slackUserId } = await memberWithRuntime(connection);
  const colleague = newSlackUserId();
  const channel = 'C0BEGUN';
  const root = { userId: colleague, bot: false, text: 'the build is red on main', ts: newTs() };
  const aside = { userId: colleague, bot: false, text: 'since the upgrade', ts: newTs() };
  loop.slack.userMessage({ channel, ts: root.ts, user: colleague, text: root.text });
  loop.slack.userMessage({ channel, ts: aside.ts, user: colleague, text: aside.text, threadTs: root.ts });
  const repliesFor = (ts: string) =>
    loop.slack.calls.filter((c) => c.method === 'conversations.replies' && c.body.ts === root.ts && c.body.latest === ts);
  const ask = async (text: string) => {
    const mention = { ...mentionBy(connection, slackUserId, text, channel), thread_ts: root.ts };
    await send(connection, mention);
    await answered(root.ts, `answer to ${text}`);
    const [run] = await runsOf(member);
    expect(run.input.text).toBe(text);
    return { run, mention };
  };

  const first = await ask('why is it red?');
  expect(first.run.input.context).toEqual([root, aside]);
  expect(repliesFor(first.mention.ts).map((c) => [c.status, Number(c.body.limit)])).toEqual([[200, 15]]);
  const held = [
    root,
    aside,
    { userId: slackUserId, bot: false, text: 'why is it red?', ts: first.mention.ts },
    { userId: null, bot: true, text: 'answer to why is it red?', ts: expect.any(String) },
  ];
  // Said in the thread after the first answer: Slack has it, the service (taking no follow-ups) does not.
  loop.slack.userMessage({ channel, ts: newTs(), user: colleague, text: 'and the cache too', threadTs: root.ts });

  loop.slack.script('conversations.replies', {
    status: 200,
    body: { ok: false, error: 'missing_scope', needed: 'channels:history', provided: 'chat:write' },
  });
  const refused = await ask('can you retry the build?');
  expect(repliesFor(refused.mention.ts).map((c) => c.error)).toEqual(['missing_scope']);
  expect(refused.run.input.context).toEqual(held);

  // Last: a 429 empties the workspace's budget for the method a while, which would hold back a call after it.
  loop.slack.script('conversations.replies', { status: 429, headers: { 'retry-after': '1' } });
  const limited = await ask('and tag it');
  expect(repliesFor(limited.mention.ts).map((c) => c.status)).toEqual([429]);
  expect(limited.run.input.context).toEqual([
    ...held,
    { userId: slackUserId, bot: false, text: 'can you retry the build?', ts: refused.mention.ts },
    { userId: null, bot: true, text: 'answer to can you retry the build?', ts: expect.any(String) },
  ]);
}, 150_000);

it('2,000 channel messages outside answered threads start no workflow', async () => {
  const connection = await connectionWith('members');
  /** The events route's answers with this outcome so far (den_ingress_outcomes_total, every reason). */
  const outcomes = async (outcome: string) =>
    [
      ...(await stack.request('GET', '/metrics')).text.matchAll(
        new RegExp(
          `den_ingress_outcomes_total\\{route="/v1/integrations/slack/\\{connectionId\\}/events",outcome="${outcome}",[^}]*\\} (\\d+)`,
          'g',
        ),
      ),
    ].reduce((sum, m) => sum + Number(m[1]), 0);
  const before = { enqueued: await outcomes('enqueued'), ineligible: await outcomes('ineligible') };
  const user = newSlackUserId();
  const events = Array.from({ length: 2000 }, (_, i) =>
    i % 2 === 0
      ? channelMessage(user, `chatter ${i}`, { channel: 'C0BUSY' })
      : channelMessage(user, `reply ${i}`, { channel: 'C0BUSY', thread: { ts: newTs(), parentUserId: user } }),
  );
  for (let i = 0; i < events.length; i += 50) {
    await Promise.all(events.slice(i, i + 50).map((event) => send(connection, event)));
  }
  // Every one was turned away at the door: neither started nor kept in Postgres for a later start (`deferred`).
  expect(await outcomes('enqueued')).toBe(before.enqueued);
  expect((await outcomes('ineligible')) - before.ineligible).toBe(2000);
  const kept = await stack.services.database.db
    .selectFrom('slack_deferred_events')
    .select('workflow_id')
    .where('connection_id', '=', connection.connectionId)
    .limit(3)
    .execute();
  expect(kept).toEqual([]);
  const count = await stack.services.temporal.client.workflow.count(`ConnectionId = '${connection.connectionId}'`);
  expect(count.count).toBe(0);
}, 150_000);
