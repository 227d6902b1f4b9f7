/**
 * A member links themselves, without a dashboard and without an operator: a member who was never
 * linked mentions the bot; the connect prompt offers `npx den slack link <code>` and no link
 * (DASHBOARD_URL is unset, so nothing leads to a page nobody serves); the member runs that command
 * as a real child process with their own API key; their held mention then runs, answered by
 * `den runtime`, another child process.
 */
import { slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { createTestOrg } from '../harness/identity';
import { spawnDen } from '../harness/process';
import {
  appMention,
  eventEnvelope,
  linkCodeFrom,
  newSlackUserId,
  postSlackEvent,
  postSlashCommand,
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
  loop = await startSlackLoop({ DASHBOARD_URL: '', SLACK_LINK_WAIT: '60s' });
  ({ stack, slack, connection } = loop);
});
afterAll(() => loop.stop());

/** `den slack link <code>` as the member runs it: their own key, the API's URL. */
async function denSlackLink(code: string, apiKey: string) {
  const proc = spawnDen(['slack', 'link', code], { DEN_API_KEY: apiKey, DEN_API_URL: stack.url });
  const { code: exit } = await proc.exited;
  return { exit, output: proc.output() };
}

it('a never-linked member mentions the bot, runs `den slack link <code>` with their own key, and their held mention runs', async () => {
  const member = await loop.org.addMember('member');
  const user = newSlackUserId();
  const mention = appMention(user, 'link me please');
  const envelope = eventEnvelope(connection, mention);
  expect((await postSlackEvent(stack, connection, envelope)).json).toEqual({ ok: true });
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));

  const prompt = await slack.waitForCall('chat.postEphemeral', (c) => c.body.user === user, 15_000);
  const text = String(prompt.body.text);
  expect(text).toContain('npx den slack link ');
  expect(text).toContain('DEN_API_KEY');
  // No dashboard: no link at all, so none that leads to a 404.
  expect(text).not.toMatch(/<[^>]*>/);
  expect(text).not.toContain('/connect/slack');
  expect((await handle.query(slackEventStateQuery)).status).toBe('awaiting_link');

  const code = linkCodeFrom(text);
  expect(code).toMatch(/^[0-9A-HJKMNP-TV-Z]{5}-[0-9A-HJKMNP-TV-Z]{5}$/);
  // Typed in lower case, as a member may.
  const linked = await denSlackLink(code.toLowerCase(), member.apiKey);
  expect({ exit: linked.exit, output: linked.output }).toEqual({ exit: 0, output: expect.any(String) });
  expect(JSON.parse(linked.output)).toEqual({ connectionId: connection.connectionId, slackUserId: user, memberId: member.memberId });

  // The held mention runs for that member, answered in its thread by their runtime.
  const state = await waitFor(
    async () => {
      const s = await handle.query(slackEventStateQuery);
      return s.status === 'run_created' ? s : undefined;
    },
    15_000,
    { what: 'run_created' },
  );
  expect(state.memberId).toBe(member.memberId);
  const runtime = spawnDen(['runtime', '--exec', 'tr a-z A-Z', '--wait', '2', '--heartbeat-interval', '1', '--grace', '5'], {
    DEN_API_KEY: member.apiKey,
    DEN_API_URL: stack.url,
  });
  try {
    await waitFor(() => slack.messages.find((m) => m.thread_ts === mention.ts && m.text === 'LINK ME PLEASE'), 30_000, {
      what: 'the answer in the thread',
    });
  } finally {
    runtime.child.kill('SIGINT');
  }
  expect((await runtime.exited).code).toBe(0);
  expect(await handle.result()).toMatchObject({ status: 'replied', memberId: member.memberId });

  // The code worked once.
  const again = await denSlackLink(code, member.apiKey);
  expect(again.exit).not.toBe(0);
  expect(again.output).toContain('link_used');
}, 90_000);

it('`/den` without a dashboard offers only the command; the command refuses a bad key, an unknown code and another organization', async () => {
  const reply = await postSlashCommand(stack, connection, { user_id: newSlackUserId() });
  expect(reply.json.response_type).toBe('ephemeral');
  expect(reply.json.text).not.toMatch(/<[^>]*>/);
  const code = linkCodeFrom(reply.json.text);

  const badKey = await denSlackLink(code, 'den_not-a-real-key-000000000000000000000000');
  expect(badKey.exit).not.toBe(0);
  expect(badKey.output).toContain('refused the API key (401)');

  const unknown = await denSlackLink('ZZZZZ-ZZZZZ', loop.org.owner.apiKey);
  expect(unknown.exit).not.toBe(0);
  expect(unknown.output).toContain('link_not_found (404)');

  const malformed = await denSlackLink('nope', loop.org.owner.apiKey);
  expect(malformed.exit).not.toBe(0);
  expect(malformed.output).toContain('invalid_request (400): the code is malformed');

  // A member of another organization cannot take this workspace's Slack user.
  const other = await createTestOrg(stack.services.database.db);
  const foreign = await denSlackLink(code, other.owner.apiKey);
  expect(foreign.exit).not.toBe(0);
  expect(foreign.output).toContain('not_found');
  // Still unspent for the right organization.
  const mine = await denSlackLink(code, (await loop.org.addMember('member')).apiKey);
  expect(mine.exit).toBe(0);
}, 60_000);
