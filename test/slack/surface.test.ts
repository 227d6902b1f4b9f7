/**
 * Slack's surface for AI apps and the Home tab, over the real stack and the strict fake Slack:
 * suggested prompts when a member opens the app's thread (the agent experience without a
 * `thread_ts`, the legacy assistant experience with one), the status line while a run works and its
 * title from the first ask, the fallback to plain messages once Slack refuses, and the Home tab.
 */
import { DEFAULT_SUGGESTED_PROMPTS } from '../../src/slack/assistant';
import { startScriptRuntime, stopRuntimes, type Spawned } from '../harness/process';
import { event, runsClient } from '../harness/runs';
import {
  appHomeOpened,
  assistantThreadStarted,
  createTestSlackConnection,
  directMessage,
  eventEnvelope,
  linkSlackUser,
  newSlackUserId,
  newTs,
  postSlackEvent,
  startSlackLoop,
  type TestSlackConnection,
} from '../harness/slack';
import type { TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

let loop: Awaited<ReturnType<typeof startSlackLoop>>;
let stack: TestStack;
const spawned: Spawned[] = [];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'den-surface-'));

beforeAll(async () => {
  loop = await startSlackLoop({ SLACK_PROGRESS_INTERVAL: '200ms' });
  stack = loop.stack;
});
afterAll(async () => {
  await stopRuntimes(spawned);
  await loop.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});
afterEach(() => loop.slack.configure({ experience: 'agent', scopes: undefined }));

const newConnection = () =>
  createTestSlackConnection(stack.services.database.db, stack.services.secretKey, loop.org.organizationId, { slack: loop.slack });

async function send(connection: TestSlackConnection, body: Record<string, unknown>): Promise<string> {
  const envelope = eventEnvelope(connection, body);
  const res = await postSlackEvent(stack, connection, envelope);
  expect(res.status).toBe(200);
  return envelope.event_id;
}

const notRouted = (eventId: string) =>
  waitFor(() => stack.logs.find((line) => line.msg === 'slack event not routed' && line.eventId === eventId)?.reason as string, 10_000);

const callsOf = (method: string, match: (body: Record<string, unknown>) => boolean = () => true) =>
  loop.slack.calls.filter((c) => c.method === method && match(c.body));

describe('suggested prompts', () => {
  it('the agent experience: opening the Messages tab sets the connection’s prompts on the DM, without a thread; once per interval', async () => {
    const connection = await newConnection();
    const prompts = [{ title: 'Ship it', message: 'Deploy main to staging.' }];
    const patched = await stack.request('PATCH', `/v1/integrations/slack/connections/${connection.connectionId}`, {
      headers: loop.org.owner.headers,
      body: { suggestedPrompts: prompts },
    });
    expect(patched.json.suggestedPrompts).toEqual(prompts);
    const user = newSlackUserId();
    await send(connection, appHomeOpened(user, 'messages', 'D0AGENT'));
    const set = await waitFor(() => loop.slack.surface.prompts.find((p) => p.channel === 'D0AGENT'), 15_000, { what: 'the prompts' });
    // A thread_ts would have made Slack drop the call without an error.
    expect(set).toEqual({ channel: 'D0AGENT', threadTs: null, prompts, ignored: false });
    expect(await notRouted(await send(connection, appHomeOpened(user, 'messages', 'D0AGENT')))).toBe('surface_fresh');
    expect(callsOf('assistant.threads.setSuggestedPrompts', (b) => b.channel_id === 'D0AGENT')).toHaveLength(1);
  }, 60_000);

  it('the legacy assistant experience: assistant_thread_started sets the default prompts on that thread', async () => {
    loop.slack.configure({ experience: 'assistant' });
    const connection = await newConnection();
    const started = assistantThreadStarted(newSlackUserId(), 'D0LEGACY');
    await send(connection, started);
    const set = await waitFor(() => loop.slack.surface.prompts.find((p) => p.channel === 'D0LEGACY'), 15_000, { what: 'the prompts' });
    expect(set).toEqual({
      channel: 'D0LEGACY',
      threadTs: started.assistant_thread.thread_ts,
      prompts: DEFAULT_SUGGESTED_PROMPTS,
      ignored: false,
    });
  }, 60_000);

  it('PATCH refuses more than four prompts, or an empty one', async () => {
    const connection = await newConnection();
    const url = `/v1/integrations/slack/connections/${connection.connectionId}`;
    const five = Array.from({ length: 5 }, (_, i) => ({ title: `t${i}`, message: `m${i}` }));
    for (const suggestedPrompts of [five, [], [{ title: '', message: 'x' }], [{ title: 't' }]]) {
      const res = await stack.request('PATCH', url, { headers: loop.org.owner.headers, body: { suggestedPrompts } });
      expect(res.status).toBe(400);
      expect(res.json.error).toBe('invalid_request');
    }
    const wrong = await stack.request('PATCH', url, { headers: loop.org.owner.headers, body: { threadFollowUps: 'everyone' } });
    expect(wrong.status).toBe(400);
  }, 30_000);
});

describe('the assistant thread while a run works', () => {
  it('a DM: "is working on it…" once the run starts, the tool the run uses, its title from the first ask, cleared when the answer lands', async () => {
    const connection = await newConnection();
    const member = await loop.org.addMember('member');
    const user = await linkSlackUser(stack, connection, member);
    const dm = { ...directMessage(user, 'summarize the incident\nwith the timeline', 'D0ASSIST'), ts: newTs() };
    await send(connection, dm);
    const runs = runsClient(stack, member.headers);
    const queued = await waitFor(async () => (await runs.list('?status=queued')).json.runs[0], 15_000, { what: 'the queued run' });
    expect((await runs.claim(queued.id)).status).toBe(200);
    const thread = { channel: 'D0ASSIST', threadTs: dm.ts };
    await waitFor(() => loop.slack.surface.statuses.find((s) => s.threadTs === dm.ts && s.status === 'is working on it…'), 15_000);
    // The title is its own call, which may land just after the status.
    await waitFor(() => loop.slack.surface.titles.find((t) => t.threadTs === dm.ts), 15_000, { what: "the thread's title" });
    expect(loop.slack.surface.titles).toContainEqual({ ...thread, title: 'summarize the incident' });
    expect((await runs.postEvent(queued.id, event(1, 1, 'capability_execution', { tool: 'search' }))).status).toBe(200);
    await waitFor(() => loop.slack.surface.statuses.find((s) => s.threadTs === dm.ts && s.status === 'is using search…'), 15_000);
    expect((await runs.postEvent(queued.id, event(1, 2, 'assistant', { text: 'All quiet.' }))).status).toBe(200);
    expect((await runs.postEvent(queued.id, event(1, 3, 'terminal', { status: 'succeeded' }))).status).toBe(200);
    await waitFor(() => loop.slack.surface.statuses.find((s) => s.threadTs === dm.ts && s.status === ''), 20_000, {
      what: 'the status cleared',
    });
    const cleared = loop.slack.surface.statuses.findLast((s) => s.threadTs === dm.ts)!;
    const answer = loop.slack.messages.find((m) => m.thread_ts === dm.ts && m.text.includes('All quiet.'))!;
    expect(cleared.status).toBe('');
    expect(cleared.at).toBeGreaterThanOrEqual(answer.postedAt);

    // A second ask in the same thread keeps its title.
    const again = { ...directMessage(user, 'and the follow-ups?', 'D0ASSIST'), ts: newTs(), thread_ts: dm.ts };
    await send(connection, again);
    const next = await waitFor(async () => (await runs.list('?status=queued')).json.runs[0], 15_000);
    expect((await runs.claim(next.id)).status).toBe(200);
    await waitFor(
      () => loop.slack.surface.statuses.filter((s) => s.threadTs === dm.ts && s.status === 'is working on it…').length === 2,
      15_000,
    );
    expect(loop.slack.surface.titles.filter((t) => t.threadTs === dm.ts)).toHaveLength(1);
    expect((await runs.postEvent(next.id, event(1, 1, 'terminal', { status: 'succeeded' }))).status).toBe(200);
  }, 90_000);

  it('with `den runtime --exec` answering: "is working on it…" while the command runs, cleared once its answer has landed', async () => {
    const connection = await newConnection();
    const member = await loop.org.addMember('member');
    const user = await linkSlackUser(stack, connection, member);
    const [started, gate] = [path.join(dir, 'working-started'), path.join(dir, 'working-gate')];
    // The command holds its answer until the test opens the gate (15 s at most), so the run is surely live meanwhile.
    const script = [
      `touch "${started}"`,
      'i=0',
      `while [ ! -f "${gate}" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done`,
      'printf "done: %s" "$(cat)"',
    ].join('\n');
    await startScriptRuntime({ url: stack.url, apiKey: member.apiKey }, { dir, name: 'working', text: script }, spawned);
    const dm = { ...directMessage(user, 'tidy the changelog', 'D0WORKING'), ts: newTs() };
    await send(connection, dm);
    const answerText = 'done: tidy the changelog';
    const statuses = () => loop.slack.surface.statuses.filter((s) => s.threadTs === dm.ts);
    const answerCalls = () => loop.slack.calls.filter((c) => c.method.startsWith('chat.') && JSON.stringify(c.body).includes(answerText));

    await waitFor(() => fs.existsSync(started), 30_000, { what: 'the command to start' });
    const working = await waitFor(() => statuses().find((s) => s.status === 'is working on it…'), 15_000, { what: 'the status' });
    expect(statuses().map((s) => s.status)).toEqual(['is working on it…']);
    expect(answerCalls()).toEqual([]);

    fs.writeFileSync(gate, '');
    const landed = await waitFor(() => answerCalls()[0], 30_000, { what: 'the answer' });
    expect(landed.body.channel).toBe('D0WORKING');
    await waitFor(() => statuses().at(-1)?.status === '', 15_000, { what: 'the status cleared' });
    expect(working.at).toBeLessThan(landed.at);
    expect(statuses().at(-1)!.at).toBeGreaterThanOrEqual(landed.at);
  }, 90_000);

  it('an app Slack refuses the assistant methods (no agent feature): remembered, and its threads keep to messages', async () => {
    loop.slack.configure({ experience: 'none' });
    const connection = await newConnection();
    const member = await loop.org.addMember('member');
    const user = await linkSlackUser(stack, connection, member);
    await startScriptRuntime({ url: stack.url, apiKey: member.apiKey }, { dir, name: 'echo', text: 'printf "done: %s" "$(cat)"' }, spawned);
    for (const text of ['first ask', 'second ask']) {
      const dm = { ...directMessage(user, text, 'D0REFUSE'), ts: newTs() };
      await send(connection, dm);
      await waitFor(() => loop.slack.messages.find((m) => m.thread_ts === dm.ts && m.text.includes(`done: ${text}`)), 60_000);
    }
    const refused = callsOf('assistant.threads.setTitle', (b) => b.channel_id === 'D0REFUSE');
    expect(refused.map((c) => c.error)).toEqual(['not_allowed']);
    // After the refusal, no assistant call for this connection: only the first ask's status went out before it.
    const assistantCalls = loop.slack.calls.filter((c) => c.method.startsWith('assistant.') && c.body.channel_id === 'D0REFUSE');
    expect(assistantCalls.map((c) => c.method)).toEqual(['assistant.threads.setStatus', 'assistant.threads.setTitle']);
    const row = await stack.services.database.db
      .selectFrom('slack_connections')
      .select('assistant_refused')
      .where('id', '=', connection.connectionId)
      .executeTakeFirstOrThrow();
    expect(row.assistant_refused).toBe('not_allowed');
  }, 120_000);
});

describe('the Home tab', () => {
  it('app_home_opened → views.publish: linked, the runtime online, the last runs with a link to each thread; at most once per interval', async () => {
    const connection = await newConnection();
    const member = await loop.org.addMember('member');
    const user = await linkSlackUser(stack, connection, member);
    await startScriptRuntime({ url: stack.url, apiKey: member.apiKey }, { dir, name: 'home', text: 'printf "ok: %s" "$(cat)"' }, spawned);
    const ts = newTs();
    const mention = { type: 'app_mention', user, text: `<@${connection.botUserId}> rotate the keys`, ts, channel: 'C0HOME', event_ts: ts };
    loop.slack.userMessage({ channel: 'C0HOME', ts, user, text: mention.text });
    await send(connection, mention);
    await waitFor(() => loop.slack.messages.find((m) => m.thread_ts === ts && m.text.includes('ok: rotate the keys')), 60_000);

    await send(connection, appHomeOpened(user, 'home'));
    const home = await waitFor(() => loop.slack.surface.homes.get(user), 15_000, { what: 'the Home tab' });
    const text = JSON.stringify(home.blocks);
    expect(text).toContain('Your Slack account is linked');
    expect(text).toContain('Your den runtime is online');
    expect(text).toContain('rotate the keys');
    expect(text).toContain(`https://fake-slack.test/archives/C0HOME/p${ts.replace('.', '')}|open the thread`);
    expect(await notRouted(await send(connection, appHomeOpened(user, 'home')))).toBe('surface_fresh');
    expect(loop.slack.surface.published.filter((p) => p.user === user)).toHaveLength(1);
  }, 120_000);

  it('an unlinked member is shown how to link (a code that works), and that no runtime of theirs is online', async () => {
    const connection = await newConnection();
    const stranger = newSlackUserId();
    await send(connection, appHomeOpened(stranger, 'home'));
    const home = await waitFor(() => loop.slack.surface.homes.get(stranger), 15_000, { what: 'the Home tab' });
    const code = /npx den slack link ([0-9A-Z]{5}-[0-9A-Z]{5})/.exec(JSON.stringify(home.blocks))?.[1];
    expect(code).toBeDefined();
    expect(JSON.stringify(home.blocks)).toContain('No den runtime of yours is online');
    const member = await loop.org.addMember('member');
    const linked = await stack.request('POST', '/v1/integrations/slack/account-links', { headers: member.headers, body: { code } });
    expect(linked.status).toBe(201);
    expect(linked.json).toMatchObject({ connectionId: connection.connectionId, slackUserId: stranger, memberId: member.memberId });
  }, 60_000);
});
