/**
 * Which events are routed, and why the others are not.
 * Pure, so each reason is a unit test. Quota is decided afterwards, by the route, because it
 * is shared state in Postgres (quota.ts).
 */
import type { SlackInvocation, SlackLifecycleType } from './contract';
import { isEvent, type SlackEventOf, type SlackEventPayload } from './event-payloads';
import { userTeamOf } from './ownership';

export type IneligibleReason =
  | 'connection_disabled'
  | 'unsupported_type'
  | 'bot_sender'
  | 'own_bot_user'
  | 'unsupported_subtype'
  | 'incomplete_event'
  | 'channel_not_allowed'
  | 'workspace_quota'
  | 'user_quota'
  | 'user_tokens_only';

export type EventClassification =
  | { route: 'lifecycle'; type: SlackLifecycleType }
  | { route: 'invocation'; invocation: SlackInvocation }
  | { route: 'ignore'; reason: IneligibleReason };

export interface EligibilityContext {
  enabled: boolean;
  botUserId: string | null;
  /** Null or empty: every channel. */
  channels: string[] | null;
  /**
   * A `message` outside a DM asks too: set only for one that src/slack/conversation.ts found is for
   * the bot (a follow-up in an answered thread, or a message that mentions the bot).
   */
  channelMessages?: boolean;
}

/**
 * Message subtypes that are still a person asking: a file shared with text
 * (https://docs.slack.dev/reference/events/message/file_share) and a thread reply also sent to
 * the channel (thread_broadcast). Edits, deletions, joins… are not.
 */
const ASKING_SUBTYPES: readonly string[] = ['file_share', 'thread_broadcast'];

/** The names of the files an event carries, for the run's input. */
function fileNames(event: SlackEventOf<'app_mention' | 'message'>): string[] {
  const files = Array.isArray(event.files) ? event.files : [];
  return files.map((file) => str(file?.name) ?? str(file?.title) ?? 'a file').slice(0, 20);
}

/** The run's input: the text, and the attached files' names listed after it (the runtime gets no file itself). */
function inputText(text: string, files: string[]): string {
  if (files.length === 0) return text;
  const listed = `Attached file${files.length === 1 ? '' : 's'}: ${files.join(', ')}`;
  return text === '' ? listed : `${text}\n\n${listed}`;
}

/**
 * tokens_revoked lists the user tokens (`tokens.oauth`) and bot tokens (`tokens.bot`) revoked.
 * The service holds only a bot token: only a revoked bot token disables the connection.
 */
function revokesBotToken(event: SlackEventOf<'tokens_revoked'>): boolean {
  const bot = event.tokens?.bot;
  return Array.isArray(bot) && bot.length > 0;
}

const str = (value: unknown): string | undefined => (typeof value === 'string' && value.length > 0 ? value : undefined);

/** DM channel ids start with D; `channel_type: im` says the same on message events. */
const isDirectMessage = (channel: string, channelType: string | null) => channelType === 'im' || channel.startsWith('D');

export function classifyEvent(event: SlackEventPayload, connection: EligibilityContext): EventClassification {
  // Lifecycle events count even on a disabled connection: they are what disables it.
  if (isEvent(event, 'tokens_revoked') && !revokesBotToken(event)) return { route: 'ignore', reason: 'user_tokens_only' };
  if (isEvent(event, 'tokens_revoked') || isEvent(event, 'app_uninstalled')) {
    const type: SlackLifecycleType = event.type;
    return { route: 'lifecycle', type };
  }
  if (!connection.enabled) return { route: 'ignore', reason: 'connection_disabled' };

  if (!isEvent(event, 'app_mention') && !isEvent(event, 'message')) return { route: 'ignore', reason: 'unsupported_type' };
  const type = event.type;
  const channelType = str(event.channel_type) ?? null;
  // A message asks in a DM, or in a channel once the conversation found it is for the bot.
  if (type === 'message' && channelType !== 'im' && connection.channelMessages !== true) {
    return { route: 'ignore', reason: 'unsupported_type' };
  }

  // A bot answering a bot would loop: anything sent by a bot or an app is never routed.
  if (event.bot_id !== undefined || event.app_id !== undefined || event.bot_profile !== undefined) {
    return { route: 'ignore', reason: 'bot_sender' };
  }
  const user = str(event.user);
  if (user && connection.botUserId && user === connection.botUserId) return { route: 'ignore', reason: 'own_bot_user' };
  // Edits, deletions, joins… carry a subtype; only new messages that ask something are invocations.
  if (event.subtype !== undefined && !ASKING_SUBTYPES.includes(String(event.subtype))) {
    return { route: 'ignore', reason: 'unsupported_subtype' };
  }

  const channel = str(event.channel);
  const ts = str(event.ts);
  const text = typeof event.text === 'string' ? event.text : '';
  const files = fileNames(event);
  if (!user || !channel || !ts || (text.trim() === '' && files.length === 0)) return { route: 'ignore', reason: 'incomplete_event' };

  const allowlist = connection.channels ?? [];
  if (allowlist.length > 0 && !isDirectMessage(channel, channelType) && !allowlist.includes(channel)) {
    return { route: 'ignore', reason: 'channel_not_allowed' };
  }

  return {
    route: 'invocation',
    invocation: {
      type,
      user,
      channel,
      channelType,
      ts,
      threadTs: str(event.thread_ts) ?? null,
      text: inputText(
        isDirectMessage(channel, channelType) && type !== 'app_mention' ? text.trim() : withoutBotMention(text, connection.botUserId),
        files,
      ),
      userTeam: userTeamOf(event),
    },
  };
}

/** A Slack user mention in message text: `<@U123>` or `<@U123|name>`. */
const MENTION = /<@([UW][A-Z0-9]+)(?:\|[^>]*)?>/g;

/**
 * The request without the bot's mention, which is how an app_mention addresses the bot and no
 * part of what was asked. Without a known bot user id, the mention that opens the text is the bot's.
 */
export function withoutBotMention(text: string, botUserId: string | null): string {
  const own = botUserId !== null && [...text.matchAll(MENTION)].some((m) => m[1] === botUserId);
  const stripped = own
    ? text.replace(MENTION, (mention, id: string) => (id === botUserId ? '' : mention))
    : text.replace(/^\s*<@[UW][A-Z0-9]+(?:\|[^>]*)?>/, '');
  return stripped.replace(/[ \t]{2,}/g, ' ').trim();
}
