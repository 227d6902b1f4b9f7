/**
 * Runtime text cannot mention anyone, over the real stack: `den runtime --exec` runs a script
 * that prints every form of Slack's `<…>` syntax (`<!channel>`, `<@U…>`, `<#C…>`, `<url|label>`…),
 * and the (local, fake) Slack Web API records what the service sent. In the progress edit, the
 * final answer, every part of a split answer, the reply that replaces a deleted message and a
 * failure's reason, no form is live, in `text` or in the blocks; a Markdown link still is a link.
 * `/den status`, the ephemeral answer that carries what an event said (its channel), is escaped
 * too.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { slackEventWorkflowId } from '../../src/slack/contract';
import { CANCEL_ACTION_ID, MESSAGE_TEXT_LIMIT } from '../../src/slack/progress';
import { escapeMrkdwn } from '../../src/slack/texts';
import { spawnDen, type Spawned } from '../harness/process';
import {
  appMention,
  eventEnvelope,
  linkSlackUser,
  MENTION_FORMS,
  PLAIN_MENTIONS,
  postSlackEvent,
  postSlashCommand,
  startSlackLoop,
  unsafeMrkdwn,
  type FakeSlack,
} from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const FORMS = [...MENTION_FORMS, ...PLAIN_MENTIONS].join(' ');

/** What the runtime prints for each request: its input names the case. */
const SCRIPT = `input=$(cat)
forms=$(cat "$(dirname "$0")/forms.txt")
case "$input" in
  *progress*) printf '%s\\n' "$forms"; sleep 3; printf '\\n[docs](https://docs.example/a) %s\\n' "$forms" ;;
  *long*) i=0; while [ $i -lt 30 ]; do printf '%s line %s\\n\\n' "$forms" "$i"; i=$((i+1)); done ;;
  *gone*) sleep 4; printf '%s\\n' "$forms" ;;
  *fail*) printf '%s\\n' "$forms"; printf '%s\\n' "$forms" >&2; exit 3 ;;
  *wait*) sleep 5; echo done ;;
esac
`;

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
let slack: FakeSlack;
let dir: string;
let runtime: Spawned;
let slackUserId: string;

beforeAll(async () => {
  loop = await startSlackLoop({ SLACK_PROGRESS_INTERVAL: '1000ms', SLACK_REPLY_MODE: 'edit' });
  ({ stack, slack } = loop);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-mentions-'));
  fs.writeFileSync(path.join(dir, 'forms.txt'), FORMS);
  fs.writeFileSync(path.join(dir, 'runtime.sh'), SCRIPT);
  const member = await loop.org.addMember('member');
  slackUserId = await linkSlackUser(stack, loop.connection, member);
  runtime = spawnDen(
    ['runtime', '--exec', `sh ${path.join(dir, 'runtime.sh')}`, '--wait', '2', '--heartbeat-interval', '1', '--grace', '5'],
    {
      DEN_API_KEY: member.apiKey,
      DEN_API_URL: stack.url,
    },
  );
  // tsx compiles the CLI first, which a loaded machine makes slow.
  await waitFor(() => runtime.output().includes('claiming runs from'), 60_000, { what: 'den runtime to start' });
}, 120_000);

afterAll(async () => {
  runtime?.child.kill('SIGINT');
  await runtime?.exited;
  await loop.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A linked member's mention, and its invocation's workflow. */
async function mention(text: string, channel?: string) {
  const event = appMention(slackUserId, text, channel);
  const envelope = eventEnvelope(loop.connection, event);
  expect((await postSlackEvent(stack, loop.connection, envelope)).json).toEqual({ ok: true });
  const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(loop.connection.connectionId, envelope.event_id));
  const accepted = await slack.waitForCall('chat.postMessage', (c) => c.body.thread_ts === event.ts, 30_000);
  const ts = slack.messages.find((m) => m.thread_ts === event.ts)!.ts;
  return { event, handle, accepted, ts };
}

type Call = FakeSlack['calls'][number];

/** The calls for one invocation's thread: its posts, and the edits of its message. */
const callsFor = (event: { channel: string; ts: string }, ts: string) =>
  slack.calls.filter(
    (c) =>
      (c.method === 'chat.postMessage' && c.body.channel === event.channel && c.body.thread_ts === event.ts) ||
      (c.method === 'chat.update' && c.body.channel === event.channel && c.body.ts === ts),
  );

/** Every text of a call as Slack would render it: `text`, and each mrkdwn text object in its blocks, after Slack's own parsing. */
const textsOf = (call: Call): string[] => call.rendered;

/** No form live in any text of any of the calls: each shows escaped, none as Slack would act on it. */
function expectNoneLive(calls: Call[]): void {
  expect(calls.length).toBeGreaterThan(0);
  for (const call of calls) {
    for (const text of textsOf(call)) {
      expect(unsafeMrkdwn(text)).toEqual([]);
      for (const form of MENTION_FORMS) expect(text).not.toContain(form);
    }
  }
}

const showsEveryForm = (text: string) => MENTION_FORMS.every((form) => text.includes(escapeMrkdwn(form)));
const hasCancel = (call: Call) => JSON.stringify(call.body.blocks).includes(CANCEL_ACTION_ID);

it('the progress edit and the final answer: every form escaped, in text and blocks; a Markdown link stays a link', async () => {
  const { event, handle, ts } = await mention('progress');
  const running = await slack.waitForCall('chat.update', (c) => c.body.ts === ts && hasCancel(c) && showsEveryForm(String(c.body.text)));
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  const calls = callsFor(event, ts);
  expectNoneLive(calls);
  expect(textsOf(running).every(showsEveryForm)).toBe(true);
  const final = calls.filter((c) => c.method === 'chat.update').at(-1)!;
  expect(hasCancel(final)).toBe(false);
  for (const text of textsOf(final)) {
    expect(showsEveryForm(text)).toBe(true);
    expect(text).toContain('<https://docs.example/a|docs>');
  }
}, 60_000);

it('a split answer: the message and every further part escaped, each within the limit', async () => {
  const { event, handle, accepted, ts } = await mention('long');
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  const calls = callsFor(event, ts);
  expectNoneLive(calls);
  const parts = calls.filter((c) => c.method === 'chat.postMessage' && c !== accepted);
  expect(parts.length).toBeGreaterThanOrEqual(1);
  expect(parts.map((c) => (c.body.metadata as { event_payload: { reply_key: string } }).event_payload.reply_key)).toContainEqual(
    expect.stringMatching(/\/part-2$/),
  );
  const final = calls.filter((c) => c.method === 'chat.update').at(-1)!;
  for (const call of [final, ...parts]) {
    expect(String(call.body.text).length).toBeLessThanOrEqual(MESSAGE_TEXT_LIMIT);
    expect(showsEveryForm(String(call.body.text))).toBe(true);
  }
}, 60_000);

it('a message someone deleted: the answer posted as a new reply, escaped', async () => {
  const { event, handle, accepted, ts } = await mention('gone');
  slack.deleteMessage(event.channel, ts);
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
  const calls = callsFor(event, ts);
  expectNoneLive(calls);
  // The edit found no message, and the answer came as a post of its own.
  expect(calls.some((c) => c.method === 'chat.update' && c.at > accepted.at)).toBe(true);
  const replies = calls.filter((c) => c.method === 'chat.postMessage' && c !== accepted);
  expect(replies).toHaveLength(1);
  expect(showsEveryForm(String(replies[0]!.body.text))).toBe(true);
  expect(slack.messages.filter((m) => m.thread_ts === event.ts).map((m) => m.text)).toEqual([replies[0]!.body.text]);
}, 60_000);

it("a failed run: its reason (the command's stderr) and its last output, escaped", async () => {
  const { event, handle, ts } = await mention('fail');
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'failed' });
  const calls = callsFor(event, ts);
  expectNoneLive(calls);
  const final = String(calls.filter((c) => c.method === 'chat.update').at(-1)!.body.text);
  expect(final).toBe(`The run failed (${escapeMrkdwn(FORMS)}).\n\n${escapeMrkdwn(FORMS)}\n`);
}, 60_000);

it('/den status: the channel an event named shows as text, not as a link', async () => {
  const { handle } = await mention('wait', 'C0X<!channel>');
  const status = await waitFor(
    async () => {
      const res = await postSlashCommand(stack, loop.connection, { user_id: slackUserId, text: 'status' });
      return String(res.json.text).includes('C0X') ? res : undefined;
    },
    15_000,
    { what: 'the run in /den status' },
  );
  expect(status.json.response_type).toBe('ephemeral');
  expect(status.json.text).toContain(' in C0X&lt;!channel&gt;');
  expect(unsafeMrkdwn(status.json.text)).toEqual([]);
  expect(await handle.result()).toMatchObject({ status: 'replied', runStatus: 'succeeded' });
}, 60_000);
