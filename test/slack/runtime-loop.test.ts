/**
 * The Slack loop with a runtime that is not the test: a linked member
 * mentions the bot in a thread → a queued run with its input and origin appears, for that member
 * only, and the thread says no runtime of theirs is running → `den runtime --exec "tr a-z A-Z"`, a
 * real child process, claims it → the upper-cased text replaces that message in the mention's
 * thread of the (local, fake) Slack Web API, or streams in a reply it then points to.
 */
import { STREAMED_TEXT } from '../../src/slack/progress';
import { createTestOrg } from '../harness/identity';
import { closedPort } from '../harness/ports';
import { spawnDen } from '../harness/process';
import { appMention, createTestSlackConnection, eventEnvelope, linkSlackUser, postSlackEvent, startSlackLoop } from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
beforeAll(async () => {
  loop = await startSlackLoop();
  stack = loop.stack;
});
afterAll(() => loop.stop());

function startRuntime(apiKey: string, exec: string) {
  const proc = spawnDen(['runtime', '--exec', exec, '--wait', '2', '--heartbeat-interval', '1', '--grace', '5'], {
    DEN_API_KEY: apiKey,
    DEN_API_URL: stack.url,
  });
  return { child: proc.child, exited: proc.exited.then((e) => e.code), output: proc.output };
}

it('a mention in a thread is answered in that thread by `den runtime --exec "tr a-z A-Z"`', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const other = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, {
    slack: loop.slack,
  });

  // Link the member's Slack account through a real slash command.
  const slackUserId = await linkSlackUser(stack, connection, member);

  // A mention inside an existing thread: the answer must go to that thread, not the message's ts.
  const threadTs = `${Math.floor(Date.now() / 1000) - 60}.000100`;
  const mention = { ...appMention(slackUserId, 'shout this please'), thread_ts: threadTs };
  expect((await postSlackEvent(stack, connection, eventEnvelope(connection, mention))).json).toEqual({ ok: true });

  const queued = await waitFor(
    async () => {
      const res = await stack.request('GET', '/v1/automation-runs?status=queued', { headers: member.headers });
      return res.json.runs[0];
    },
    15_000,
    { what: 'the queued run' },
  );
  expect(queued).toMatchObject({
    status: 'queued',
    memberId: member.memberId,
    input: { text: 'shout this please' },
    origin: {
      kind: 'slack',
      connectionId: connection.connectionId,
      teamId: connection.teamId,
      channelId: mention.channel,
      threadTs,
      userId: slackUserId,
    },
  });
  // Only that member sees it.
  expect((await stack.request('GET', '/v1/automation-runs?status=queued', { headers: other.headers })).json.runs).toEqual([]);

  const runtime = startRuntime(member.apiKey, 'tr a-z A-Z');
  try {
    // One message in the thread at once: no runtime was online when the member asked, so it says
    // so; the answer then replaces it (test/slack/runtime-gate.test.ts shows the claim's progress between).
    const post = await loop.slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === threadTs, 30_000);
    expect(post.body).toMatchObject({
      channel: mention.channel,
      thread_ts: threadTs,
      text: expect.stringContaining('No den runtime of yours is running'),
      metadata: { event_type: 'den_run_reply', event_payload: { reply_key: expect.stringMatching(/^slack-event\//) } },
    });
    // The answer replaces that first message; or, when the runtime's text came before its end, it
    // streamed in a reply and the first message points to it. Either way the member reads it once.
    const thread = () => loop.slack.messages.filter((m) => m.thread_ts === threadTs);
    const atRest = () =>
      thread().some((m) => m.text === 'SHOUT THIS PLEASE' && !m.stream) ||
      (thread().some((m) => m.text === STREAMED_TEXT) && thread().some((m) => m.stream?.stopped && m.text === 'SHOUT THIS PLEASE'));
    await waitFor(atRest, 30_000, { what: 'the answer in the thread' });
    expect(thread().filter((m) => m.text.includes('SHOUT THIS PLEASE'))).toHaveLength(1);
    expect(
      thread()
        .filter((m) => m.text !== 'SHOUT THIS PLEASE')
        .map((m) => m.text),
    ).toEqual(thread().length === 1 ? [] : [STREAMED_TEXT]);
    const run = await stack.request('GET', `/v1/automation-runs/${queued.id}`, { headers: member.headers });
    expect(run.json).toMatchObject({ status: 'succeeded', attempt: 1, countsByType: { assistant: 1, terminal: 1 } });
  } finally {
    runtime.child.kill('SIGINT');
  }
  // Ctrl-C: stops claiming and exits 0.
  expect(await runtime.exited).toBe(0);
  expect(runtime.output()).toContain(`claimed run ${queued.id} (attempt 1)`);
}, 60_000);

it('reports a failing command as failed, with the tail of its stderr', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, {
    slack: loop.slack,
  });
  const mention = appMention(await linkSlackUser(stack, connection, member), 'fail please');
  await postSlackEvent(stack, connection, eventEnvelope(connection, mention));

  const runtime = startRuntime(member.apiKey, 'echo "tool crashed" >&2; exit 3');
  try {
    const failed = () => loop.slack.messages.find((m) => m.thread_ts === mention.ts && m.text === 'The run failed (tool crashed).');
    await waitFor(failed, 30_000, { what: 'the failure in the thread' });
  } finally {
    runtime.child.kill('SIGINT');
  }
  expect(await runtime.exited).toBe(0);
}, 60_000);

it('exits non-zero with a clear message for a bad key, and for an unreachable API', async () => {
  const bad = startRuntime('den_not-a-real-key-000000000000000000000000', 'cat');
  expect(await bad.exited).not.toBe(0);
  expect(bad.output()).toContain('refused the API key (401)');

  const port = await closedPort();
  const unreachable = spawnDen(['runtime', '--exec', 'cat', '--api-url', `http://127.0.0.1:${port}`, '--api-key', 'den_x'], {});
  expect((await unreachable.exited).code).not.toBe(0);
  expect(unreachable.output()).toContain(`cannot reach the API at http://127.0.0.1:${port}`);
}, 30_000);
