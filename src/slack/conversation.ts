/**
 * Which channel messages and surface events are for the bot, decided before anything is read:
 * pure, so each rule is a unit test. The events route (src/slack/thread-routing.ts) adds the one
 * lookup a thread reply needs, whether this connection answered in that thread.
 *
 * With `message.channels` (and `.groups`, `.mpim`) subscribed, Slack sends every message of every
 * channel the bot is in. Almost all are not for the bot, so each is settled here by the cheapest
 * test that settles it: a bot's or an edit is never asked; a message that mentions the bot is its
 * `app_mention` again (one run of the two, src/slack/contract.ts `slackMessageWorkflowId`); a
 * message outside a thread is not a follow-up; and a reply in a thread is one only where the
 * connection answered, from the thread's asker or (`members`) any linked member, and only when it
 * mentions no one else.
 */
import type { SlackSurfaceEvent, ThreadFollowUps } from './contract';
import { nonEmptyString } from './envelope';
import { isEvent, type SlackEventOf, type SlackEventPayload } from './event-payloads';

/** Why a channel message or a surface event was acknowledged and not routed. */
export type ConversationIgnoreReason =
  /** The connection takes no follow-ups: a channel message is left to its `app_mention`, if any. */
  | 'follow_ups_off'
  /** A channel message outside a thread that does not mention the bot. */
  | 'not_in_thread'
  /** A thread reply in a thread this connection never answered. */
  | 'unanswered_thread'
  /** Follow-ups from the thread's asker only (`asker`), and this is someone else. */
  | 'not_asker'
  /** It mentions someone, and not the bot: it is for them. */
  | 'mentions_other'
  /** A message no one asks with (a bot's, an edit, a join…). */
  | 'not_asking'
  /** The member's surface was published within SLACK_HOME_MIN_INTERVAL. */
  | 'surface_fresh'
  /** A surface event the service does not act on (the assistant thread's context moved, an About tab opened). */
  | 'surface_unused';

/** What a `message` event outside a DM is, before any lookup. */
export type ChannelMessageVerdict =
  | { kind: 'ignore'; reason: ConversationIgnoreReason }
  /** It mentions the bot: an invocation like its `app_mention`, whichever arrives first. */
  | { kind: 'mention' }
  /** A reply in a thread: for the bot if the thread is answered (and `forBot`), else at most the thread's context. */
  | {
      kind: 'thread_reply';
      thread: { channel: string; threadTs: string };
      message: { ts: string; user: string; text: string };
      /** Why it is not for the bot even in an answered thread (it mentions someone else), if so. */
      notForBot?: ConversationIgnoreReason;
    };

/** Message subtypes that are a person writing: a file with text, a reply also sent to the channel. */
const WRITING_SUBTYPES: readonly string[] = ['file_share', 'thread_broadcast'];

/** A user mention in message text: `<@U123>` or `<@U123|name>`. */
const USER_MENTION = /<@([UW][A-Z0-9]+)(?:\|[^>]*)?>/g;
/** `<!here>`, `<!channel>`, `<!everyone>`, `<!subteam^…>`: for people, not for the bot. */
const GROUP_MENTION = /<!(?:here|channel|everyone|subteam\^[^>]*)>/;

/** Whether the text mentions this bot user. */
function mentionsBot(messageText: string, botUserId: string | null): boolean {
  return botUserId !== null && [...messageText.matchAll(USER_MENTION)].some((m) => m[1] === botUserId);
}

/** Whether the text mentions someone (a user, a group, the channel) and not this bot: then it is for them. */
export function mentionsOthersOnly(messageText: string, botUserId: string | null): boolean {
  if (mentionsBot(messageText, botUserId)) return false;
  return [...messageText.matchAll(USER_MENTION)].length > 0 || GROUP_MENTION.test(messageText);
}

/** A `message` event from a channel, a private channel or a group DM (not a DM: those are asked as ever). */
export function isChannelMessage(event: SlackEventPayload): event is SlackEventOf<'message'> {
  if (!isEvent(event, 'message')) return false;
  const channelType = nonEmptyString(event.channel_type);
  if (channelType !== undefined) return channelType === 'channel' || channelType === 'group' || channelType === 'mpim';
  const channel = nonEmptyString(event.channel);
  return channel !== undefined && !channel.startsWith('D');
}

/** A channel `message` event, judged without a lookup (isChannelMessage must hold). */
export function judgeChannelMessage(
  event: SlackEventOf<'message'>,
  connection: { botUserId: string | null; threadFollowUps: ThreadFollowUps },
): ChannelMessageVerdict {
  const ignore = (reason: ConversationIgnoreReason) => ({ kind: 'ignore' as const, reason });
  if (connection.threadFollowUps === 'off') return ignore('follow_ups_off');
  if (event.bot_id !== undefined || event.app_id !== undefined || event.bot_profile !== undefined) return ignore('not_asking');
  if (event.subtype !== undefined && !WRITING_SUBTYPES.includes(String(event.subtype))) return ignore('not_asking');
  const user = nonEmptyString(event.user);
  if (user === undefined || (connection.botUserId !== null && user === connection.botUserId)) return ignore('not_asking');
  const body = typeof event.text === 'string' ? event.text : '';
  if (mentionsBot(body, connection.botUserId)) return { kind: 'mention' };
  const channel = nonEmptyString(event.channel);
  const ts = nonEmptyString(event.ts);
  const threadTs = nonEmptyString(event.thread_ts);
  if (channel === undefined || ts === undefined || threadTs === undefined || threadTs === ts) return ignore('not_in_thread');
  return {
    kind: 'thread_reply',
    thread: { channel, threadTs },
    message: { ts, user, text: body },
    ...(mentionsOthersOnly(body, connection.botUserId) ? { notForBot: 'mentions_other' as const } : {}),
  };
}

/** Whether a reply in an answered thread may ask, by the connection's setting: the asker always, others under `members`. */
export function followUpAllowed(mode: ThreadFollowUps, user: string, askerSlackUserId: string): boolean {
  if (mode === 'off') return false;
  return mode === 'members' || user === askerSlackUserId;
}

/**
 * A surface event: the app's thread opened (its suggested prompts) or its Home tab opened; an
 * event to acknowledge and leave; or undefined for any other event.
 *
 * - `assistant_thread_started`: the legacy assistant experience (`assistant_view`) opened a thread;
 *   its prompts go to that thread (`thread_ts`).
 * - `app_home_opened` with `tab: "messages"`: the agent experience (`agent_view`) has no
 *   `assistant_thread_started`; its prompts go to the channel alone (a `thread_ts` would make
 *   Slack drop the call without an error).
 * - `app_home_opened` with `tab: "home"`: the Home tab (views.publish).
 */
export function surfaceOf(event: SlackEventPayload): SlackSurfaceEvent | { ignore: ConversationIgnoreReason } | undefined {
  if (isEvent(event, 'assistant_thread_context_changed')) return { ignore: 'surface_unused' };
  if (isEvent(event, 'assistant_thread_started')) {
    const thread = event.assistant_thread;
    const user = nonEmptyString(thread?.user_id);
    const channel = nonEmptyString(thread?.channel_id);
    const threadTs = nonEmptyString(thread?.thread_ts);
    if (user === undefined || channel === undefined || threadTs === undefined) return { ignore: 'surface_unused' };
    return { kind: 'prompts', user, channel, threadTs };
  }
  if (!isEvent(event, 'app_home_opened')) return undefined;
  const user = nonEmptyString(event.user);
  if (user === undefined) return { ignore: 'surface_unused' };
  if (event.tab === 'home') return { kind: 'home', user };
  const channel = nonEmptyString(event.channel);
  if (event.tab === 'messages' && channel !== undefined) return { kind: 'prompts', user, channel, threadTs: null };
  return { ignore: 'surface_unused' };
}
