/**
 * The app manifest of one connection (https://docs.slack.dev/reference/app-manifest): what an
 * admin pastes into *Create New App → From a manifest* so the app has everything this service
 * needs, every Request URL already pointing at this deployment (APP_BASE_URL). Pure: the routes
 * and the docs test read the same constants.
 *
 * It carries the bot scopes the service uses, the bot events, the `/den` command, interactivity
 * (the Cancel button and its `response_url`), the Messages tab with messages allowed (how a member
 * sends the bot a direct message, `message.im`), the Home tab, the agent surface (`agent_view`,
 * `assistant:write`) and the OAuth redirect URL of the install flow; the channel message events
 * only while the connection takes follow-ups. Token rotation stays off: the install's bot token
 * never expires.
 */
import type { AppsManifestCreateArguments } from '@slack/web-api';

export type SlackAppManifest = AppsManifestCreateArguments['manifest'];
/** Slack's names of bot scopes and events, as @slack/web-api types them. */
type ManifestBotScope = NonNullable<NonNullable<NonNullable<SlackAppManifest['oauth_config']>['scopes']>['bot']>[number];
type ManifestBotEvent = NonNullable<NonNullable<NonNullable<SlackAppManifest['settings']>['event_subscriptions']>['bot_events']>[number];

/**
 * The bot token's scopes: reading mentions, posting and streaming (`chat:write` covers
 * chat.startStream, chat.appendStream, chat.stopStream and deleting the bot's own messages), the
 * slash command, and the four `*:history` scopes a retried reply needs to look for itself in its thread.
 */
const BOT_SCOPES = [
  'app_mentions:read',
  'chat:write',
  'commands',
  'channels:history',
  'groups:history',
  'im:history',
  'mpim:history',
] as const;

/** Mentions and direct messages (invocations), and the two lifecycle events. */
const BOT_EVENTS = ['app_mention', 'message.im', 'app_uninstalled', 'tokens_revoked'] as const;

// ─── The conversation: follow-ups, the agent surface, the Home tab ─────────────────────────────

/** The agent surface's scope: suggested prompts and thread titles (https://docs.slack.dev/ai/developing-agents). */
const ASSISTANT_SCOPES = ['assistant:write'] as const;

/**
 * The agent surface's events and the Home tab's: the legacy assistant experience's thread opened,
 * its context moved, and the app's Home or Messages tab opened (the agent experience's thread).
 */
const SURFACE_EVENTS = ['assistant_thread_started', 'assistant_thread_context_changed', 'app_home_opened'] as const;

/**
 * Every message of the channels, private channels and group DMs the bot is in: subscribed only
 * while follow-ups are on, since each one counts in Slack's 30,000 events per workspace an hour.
 * Their scopes (`*:history`) are among BOT_SCOPES already.
 */
export const FOLLOW_UP_EVENTS = ['message.channels', 'message.groups', 'message.mpim'] as const;

/** What an app made before the conversation features had: an app the service knows nothing of is taken to have this. */
export const EARLIER_APP = { scopes: [...BOT_SCOPES] as string[], events: [...BOT_EVENTS] as string[] };

/** What a connection's settings ask of its app, beyond the manifest's fixed parts. */
export interface ConversationManifestOptions {
  threadFollowUps: 'off' | 'asker' | 'members';
  suggestedPrompts: { title: string; message: string }[];
}

/** The scopes and events a connection's app needs for its settings. */
export function manifestNeeds(options: Pick<ConversationManifestOptions, 'threadFollowUps'>): { scopes: string[]; events: string[] } {
  return {
    scopes: [...BOT_SCOPES, ...ASSISTANT_SCOPES],
    events: [...BOT_EVENTS, ...SURFACE_EVENTS, ...(options.threadFollowUps === 'off' ? [] : FOLLOW_UP_EVENTS)],
  };
}

/** What of `needs` the app is not known to have; both empty: its manifest is current. */
export function appLacks(
  app: { scopes: string[] | null; events: string[] | null },
  needs: { scopes: string[]; events: string[] },
): { scopes: string[]; events: string[] } {
  const scopes = app.scopes ?? EARLIER_APP.scopes;
  const events = app.events ?? EARLIER_APP.events;
  return { scopes: needs.scopes.filter((s) => !scopes.includes(s)), events: needs.events.filter((e) => !events.includes(e)) };
}

/**
 * The agent experience (`agent_view`, which Slack's docs now describe; `assistant_view` is the
 * legacy one), with its description (at most 300 characters) and suggested prompts (at most four),
 * as @slack/web-api's manifest types state them.
 */
function agentView(prompts: ConversationManifestOptions['suggestedPrompts']) {
  return {
    agent_description: 'Asks your own den runtime: it reads this thread and answers here.',
    suggested_prompts: prompts.slice(0, 4).map(({ title, message }) => ({ title, message })),
  };
}

const SLASH_COMMAND = '/den';

/** Where Slack's OAuth install sends the admin back (src/slack/routes/oauth-callback.ts). */
export const OAUTH_CALLBACK_PATH = '/v1/integrations/slack/oauth/callback';

/** The connection's Request URLs on this deployment. */
function requestUrls(publicBaseUrl: string, connectionId: string) {
  const base = `${publicBaseUrl.replace(/\/+$/, '')}/v1/integrations/slack/${connectionId}`;
  return { events: `${base}/events`, commands: `${base}/commands`, interactions: `${base}/interactions` };
}

export const oauthRedirectUrl = (publicBaseUrl: string): string => `${publicBaseUrl.replace(/\/+$/, '')}${OAUTH_CALLBACK_PATH}`;

/** A bot user's display name takes `a-z`, `0-9`, `-`, `_` and `.` only (up to 80 characters). */
export function botDisplayName(name: string): string {
  const cleaned = name
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 80);
  return cleaned === '' ? 'den' : cleaned;
}

export function slackAppManifest(input: {
  name: string;
  publicBaseUrl: string;
  connectionId: string;
  conversation: ConversationManifestOptions;
}): SlackAppManifest {
  const urls = requestUrls(input.publicBaseUrl, input.connectionId);
  const needs = manifestNeeds(input.conversation);
  return {
    _metadata: { major_version: 1, minor_version: 1 },
    display_information: {
      name: input.name,
      description: 'Ask your den runtime from Slack: mention the bot or send it a direct message.',
    },
    features: {
      app_home: { home_tab_enabled: true, messages_tab_enabled: true, messages_tab_read_only_enabled: false },
      bot_user: { display_name: botDisplayName(input.name), always_online: true },
      agent_view: agentView(input.conversation.suggestedPrompts),
      slash_commands: [
        {
          command: SLASH_COMMAND,
          url: urls.commands,
          description: 'Connect your Slack account to den, list or cancel your requests',
          usage_hint: '[status | cancel | help]',
          should_escape: false,
        },
      ],
    },
    oauth_config: {
      redirect_urls: [oauthRedirectUrl(input.publicBaseUrl)],
      scopes: { bot: needs.scopes as ManifestBotScope[] },
    },
    settings: {
      event_subscriptions: { request_url: urls.events, bot_events: needs.events as ManifestBotEvent[] },
      interactivity: { is_enabled: true, request_url: urls.interactions },
      org_deploy_enabled: false,
      socket_mode_enabled: false,
      token_rotation_enabled: false,
    },
  };
}
