/**
 * The conversation's pure rules: which channel messages and surface events are for the bot, the
 * thread context's bounds, the Home tab's view, what the app lacks for its settings, and what a
 * member is told about their runtime.
 */
import { assistantStatus, promptsOf, threadTitle, DEFAULT_SUGGESTED_PROMPTS } from '../../src/slack/assistant';
import { boundContext, compareTs, contextFromReplies } from '../../src/slack/context';
import { followUpAllowed, isChannelMessage, judgeChannelMessage, mentionsOthersOnly, surfaceOf } from '../../src/slack/conversation';
import { classifyEvent } from '../../src/slack/eligibility';
import type { SlackEventOf } from '../../src/slack/event-payloads';
import { homeView, HOME_BLOCK_LIMIT } from '../../src/slack/home';
import { appLacks, EARLIER_APP, FOLLOW_UP_EVENTS, manifestNeeds } from '../../src/slack/manifest';
import { humanDuration, noRuntimeText, pausedText } from '../../src/slack/runtime-texts';

const BOT = 'UBOT1';
const on = { botUserId: BOT, threadFollowUps: 'asker' as const };
const REPLY = {
  type: 'message' as const,
  channel_type: 'channel' as const,
  channel: 'C1',
  user: 'U1',
  ts: '1700000010.000200',
  thread_ts: '1700000000.000100',
  parent_user_id: 'U1',
};
/** A reply in a channel's thread, as Slack sends it. */
const reply = (text: string, extra: Partial<SlackEventOf<'message'>> = {}): SlackEventOf<'message'> => ({ ...REPLY, text, ...extra });

describe('channel messages', () => {
  it('are the message events of channels, private channels and group DMs, not of DMs', () => {
    expect(isChannelMessage(reply('x'))).toBe(true);
    expect(isChannelMessage(reply('x', { channel_type: 'group' }))).toBe(true);
    expect(isChannelMessage(reply('x', { channel_type: 'mpim' }))).toBe(true);
    expect(isChannelMessage(reply('x', { channel_type: 'im', channel: 'D1' }))).toBe(false);
    expect(isChannelMessage({ type: 'app_mention', channel: 'C1' })).toBe(false);
  });

  it('are never for the bot while the connection takes no follow-ups', () => {
    expect(judgeChannelMessage(reply('and the tests too'), { ...on, threadFollowUps: 'off' })).toEqual({
      kind: 'ignore',
      reason: 'follow_ups_off',
    });
  });

  it('settle by their own fields what needs no lookup: a bot, an edit, the bot itself, a message outside a thread', () => {
    expect(judgeChannelMessage(reply('x', { bot_id: 'B1' }), on)).toEqual({ kind: 'ignore', reason: 'not_asking' });
    expect(judgeChannelMessage(reply('x', { subtype: 'message_changed' }), on)).toEqual({ kind: 'ignore', reason: 'not_asking' });
    expect(judgeChannelMessage(reply('x', { user: BOT }), on)).toEqual({ kind: 'ignore', reason: 'not_asking' });
    expect(judgeChannelMessage(reply('x', { thread_ts: undefined }), on)).toEqual({ kind: 'ignore', reason: 'not_in_thread' });
    // A thread's first message is not a reply in it.
    expect(judgeChannelMessage(reply('x', { thread_ts: '1700000010.000200' }), on)).toEqual({ kind: 'ignore', reason: 'not_in_thread' });
  });

  it('that mention the bot are the app_mention again, wherever they are', () => {
    expect(judgeChannelMessage(reply(`<@${BOT}> and staging`), on)).toEqual({ kind: 'mention' });
    expect(judgeChannelMessage(reply(`<@${BOT}|den> hi`, { thread_ts: undefined }), on)).toEqual({ kind: 'mention' });
  });

  it('in a thread are follow-up candidates; one that mentions someone else and not the bot is for them', () => {
    expect(judgeChannelMessage(reply('and the tests too'), on)).toEqual({
      kind: 'thread_reply',
      thread: { channel: 'C1', threadTs: '1700000000.000100' },
      message: { ts: '1700000010.000200', user: 'U1', text: 'and the tests too' },
    });
    for (const text of ['<@U2> can you look?', '<!here> heads up', '<!subteam^S1> ping']) {
      expect(judgeChannelMessage(reply(text), on)).toMatchObject({ kind: 'thread_reply', notForBot: 'mentions_other' });
    }
    expect(mentionsOthersOnly(`<@U2> and <@${BOT}>`, BOT)).toBe(false);
    expect(mentionsOthersOnly('no one at all', BOT)).toBe(false);
  });

  it('follow up from the asker only (`asker`), or from anyone (`members`)', () => {
    expect(followUpAllowed('asker', 'U1', 'U1')).toBe(true);
    expect(followUpAllowed('asker', 'U2', 'U1')).toBe(false);
    expect(followUpAllowed('members', 'U2', 'U1')).toBe(true);
    expect(followUpAllowed('off', 'U1', 'U1')).toBe(false);
  });

  it('become invocations with the bot mention removed, only when the router says they are for the bot', () => {
    const connection = { enabled: true, botUserId: BOT, channels: null };
    expect(classifyEvent(reply('and the tests too'), connection)).toEqual({ route: 'ignore', reason: 'unsupported_type' });
    expect(classifyEvent(reply(`<@${BOT}> and the tests too`), { ...connection, channelMessages: true })).toMatchObject({
      route: 'invocation',
      invocation: { type: 'message', channel: 'C1', threadTs: '1700000000.000100', text: 'and the tests too' },
    });
  });
});

describe('surface events', () => {
  it('the legacy assistant experience opens a thread: its prompts go to that thread', () => {
    const started = {
      type: 'assistant_thread_started',
      assistant_thread: { user_id: 'U1', channel_id: 'D1', thread_ts: '1.2', context: {} },
    };
    expect(surfaceOf(started)).toEqual({ kind: 'prompts', user: 'U1', channel: 'D1', threadTs: '1.2' });
  });

  it('the agent experience opens the Messages tab: its prompts go to the channel, with no thread', () => {
    expect(surfaceOf({ type: 'app_home_opened', user: 'U1', channel: 'D1', tab: 'messages' })).toEqual({
      kind: 'prompts',
      user: 'U1',
      channel: 'D1',
      threadTs: null,
    });
  });

  it('the Home tab is published; the About tab and a moved context are acknowledged and left', () => {
    expect(surfaceOf({ type: 'app_home_opened', user: 'U1', channel: 'D1', tab: 'home' })).toEqual({ kind: 'home', user: 'U1' });
    expect(surfaceOf({ type: 'app_home_opened', user: 'U1', tab: 'about' })).toEqual({ ignore: 'surface_unused' });
    expect(surfaceOf({ type: 'assistant_thread_context_changed' })).toEqual({ ignore: 'surface_unused' });
    expect(surfaceOf({ type: 'app_mention' })).toBeUndefined();
  });
});

describe('the thread context', () => {
  const message = (ts: string, text: string, bot = false) => ({ userId: bot ? null : 'U1', bot, text, ts });

  it('is the messages before the request, oldest first, one per ts (what the service holds wins)', () => {
    const held = [message('10.000002', 'our answer', true), message('10.000001', 'first ask')];
    const fetched = [message('10.000001', 'first ask (Slack)'), message('10.000003', 'a colleague'), message('10.000009', 'later')];
    expect(boundContext([held, fetched], '10.000005', { maxMessages: 50, maxChars: 40_000 })).toEqual([
      message('10.000001', 'first ask'),
      message('10.000002', 'our answer', true),
      message('10.000003', 'a colleague'),
    ]);
  });

  it('keeps the newest within the bounds of messages and characters, a too-long newest message by its end', () => {
    const many = Array.from({ length: 60 }, (_, i) => message(`20.${String(i + 1).padStart(6, '0')}`, `m${i + 1}`));
    const bounded = boundContext([many], '21.000000', { maxMessages: 50, maxChars: 40_000 });
    expect(bounded).toHaveLength(50);
    expect(bounded[0]!.text).toBe('m11');
    expect(bounded.at(-1)!.text).toBe('m60');
    const chars = boundContext([[message('1.1', 'a'.repeat(30)), message('1.2', 'b'.repeat(30))]], '2.0', {
      maxMessages: 50,
      maxChars: 40,
    });
    expect(chars).toEqual([message('1.2', 'b'.repeat(30))]);
    expect(boundContext([[message('1.1', `${'x'.repeat(90)}END`)]], '2.0', { maxMessages: 5, maxChars: 10 })).toEqual([
      message('1.1', `${'x'.repeat(7)}END`),
    ]);
  });

  it('orders ts numerically, and reads a conversations.replies page: bots by bot_id or the bot user', () => {
    expect(compareTs('9.000001', '10.000000')).toBeLessThan(0);
    expect(compareTs('10.000010', '10.000009')).toBeGreaterThan(0);
    const page = {
      messages: [
        { ts: '1.1', user: 'U1', text: 'q' },
        { ts: '1.2', bot_id: 'B1', text: 'a' },
        { ts: '1.3', user: BOT, text: 'b' },
      ],
    };
    expect(contextFromReplies(page, BOT)).toEqual([
      { userId: 'U1', bot: false, text: 'q', ts: '1.1' },
      { userId: null, bot: true, text: 'a', ts: '1.2' },
      { userId: BOT, bot: true, text: 'b', ts: '1.3' },
    ]);
  });
});

describe('the app against its settings', () => {
  it('needs the channel message events only while follow-ups are on', () => {
    const off = manifestNeeds({ threadFollowUps: 'off' });
    const asker = manifestNeeds({ threadFollowUps: 'asker' });
    for (const event of FOLLOW_UP_EVENTS) {
      expect(off.events).not.toContain(event);
      expect(asker.events).toContain(event);
    }
    expect(off.scopes).toContain('assistant:write');
    expect(off.events).toEqual(expect.arrayContaining(['app_home_opened', 'assistant_thread_started', 'assistant_thread_context_changed']));
  });

  it('lacks what it is not known to have; an app the service knows nothing of has what apps had before', () => {
    const needs = manifestNeeds({ threadFollowUps: 'members' });
    expect(appLacks({ scopes: needs.scopes, events: needs.events }, needs)).toEqual({ scopes: [], events: [] });
    expect(appLacks({ scopes: null, events: null }, needs)).toEqual({
      scopes: ['assistant:write'],
      events: needs.events.filter((e) => !EARLIER_APP.events.includes(e)),
    });
  });
});

describe('the assistant surface', () => {
  it('suggests the connection’s prompts, else the defaults, four at most', () => {
    expect(promptsOf(null)).toEqual(DEFAULT_SUGGESTED_PROMPTS);
    const five = Array.from({ length: 5 }, (_, i) => ({ title: `t${i}`, message: `m${i}` }));
    expect(promptsOf(five)).toHaveLength(4);
  });

  it('titles a thread by its first line, and says what the run uses', () => {
    expect(threadTitle('  deploy staging\nthen prod')).toBe('deploy staging');
    expect(threadTitle('x'.repeat(100))).toHaveLength(60);
    expect(assistantStatus()).toBe('is working on it…');
    expect(assistantStatus('search')).toBe('is using search…');
  });
});

describe('the Home tab', () => {
  const now = 1_800_000_000_000;
  it('shows a linked member their runtime and last runs, with links to the threads, within Slack’s 100 blocks', () => {
    const runs = Array.from({ length: 9 }, (_, i) => ({
      runId: `r${i}`,
      status: 'succeeded',
      createdAt: now - 60_000,
      text: `<@U9> ask ${i}`,
      permalink: i === 0 ? 'https://x.slack.com/archives/C1/p1' : null,
    }));
    const view = homeView({ link: { linked: true, memberId: 'm1' }, runtime: { online: true, lastSeenAt: null }, runs, now });
    const text = JSON.stringify(view);
    expect(view.type).toBe('home');
    expect(view.blocks.length).toBeLessThanOrEqual(HOME_BLOCK_LIMIT);
    expect(view.blocks.filter((b) => b.type === 'context')).toHaveLength(5);
    expect(text).toContain('Your den runtime is online');
    expect(text).toContain('<https://x.slack.com/archives/C1/p1|open the thread>');
    // A run's text cannot mention anyone.
    expect(text).toContain('&lt;@U9&gt;');
  });

  it('tells an unlinked member how to link, and a member without a runtime how to start one', () => {
    const view = homeView({
      link: { linked: false, code: 'ABCDE-FGHJK', ttlMs: 600_000 },
      runtime: { online: false, lastSeenAt: null },
      runs: [],
      now,
    });
    const text = JSON.stringify(view);
    expect(text).toContain('npx den slack link ABCDE-FGHJK');
    expect(text).toContain('npx den runtime');
    const seen = homeView({ link: { linked: true, memberId: 'm' }, runtime: { online: false, lastSeenAt: now - 180_000 }, runs: [], now });
    expect(JSON.stringify(seen)).toContain('last seen 3 minutes ago');
  });
});

describe('what a member is told about their runtime', () => {
  it('no runtime online: how to start one, and how long the request waits', () => {
    const text = noRuntimeText({ claimDeadlineMs: 600_000, lastSeenAt: null, now: 0 });
    expect(text).toContain('No den runtime of yours is running');
    expect(text).toContain('npx den runtime');
    expect(text).toContain('waits 10 minutes');
    expect(humanDuration(90_000)).toBe('90 seconds');
    expect(humanDuration(7_200_000)).toBe('2 hours');
  });

  it('paused: the last error (escaped) and when it lifts; a probe under way: ask again once it answered', () => {
    const now = Date.UTC(2026, 0, 1, 12, 0);
    const open = pausedText({ phase: 'open', pausedUntil: now + 300_000, lastError: 'boom <!channel>', now });
    expect(open).toContain('boom &lt;!channel&gt;');
    expect(open).toContain('lifts in 5 minutes (at 12:05 UTC)');
    expect(pausedText({ phase: 'half_open', pausedUntil: now, lastError: null, now })).toContain('trying one request first');
  });
});
