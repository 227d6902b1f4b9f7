/**
 * The app manifest of one connection (https://docs.slack.dev/reference/app-manifest): what an
 * admin pastes into *Create New App → From a manifest* so the app has everything this service
 * needs, every Request URL already pointing at this deployment (APP_BASE_URL). Pure: the routes
 * and the docs test read the same constants.
 *
 * It carries the bot scopes the service uses, the four bot events, the `/den` command,
 * interactivity (the Cancel button and its `response_url`), the Messages tab with messages
 * allowed (how a member sends the bot a direct message, `message.im`), and the OAuth redirect
 * URL of the install flow. Token rotation stays off: the install's bot token never expires.
 */
import type { AppsManifestCreateArguments } from '@slack/web-api';

export type SlackAppManifest = AppsManifestCreateArguments['manifest'];

/**
 * The bot token's scopes: reading mentions, posting and streaming (`chat:write` covers
 * chat.startStream, chat.appendStream, chat.stopStream and deleting the bot's own messages), the
 * slash command, and the four `*:history` scopes a retried reply needs to look for itself in its thread.
 */
export const BOT_SCOPES = [
  'app_mentions:read',
  'chat:write',
  'commands',
  'channels:history',
  'groups:history',
  'im:history',
  'mpim:history',
] as const;

/** Mentions and direct messages (invocations), and the two lifecycle events. */
export const BOT_EVENTS = ['app_mention', 'message.im', 'app_uninstalled', 'tokens_revoked'] as const;

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

export function slackAppManifest(input: { name: string; publicBaseUrl: string; connectionId: string }): SlackAppManifest {
  const urls = requestUrls(input.publicBaseUrl, input.connectionId);
  return {
    _metadata: { major_version: 1, minor_version: 1 },
    display_information: {
      name: input.name,
      description: 'Ask your den runtime from Slack: mention the bot or send it a direct message.',
    },
    features: {
      app_home: { home_tab_enabled: false, messages_tab_enabled: true, messages_tab_read_only_enabled: false },
      bot_user: { display_name: botDisplayName(input.name), always_online: true },
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
      scopes: { bot: [...BOT_SCOPES] },
    },
    settings: {
      event_subscriptions: { request_url: urls.events, bot_events: [...BOT_EVENTS] },
      interactivity: { is_enabled: true, request_url: urls.interactions },
      org_deploy_enabled: false,
      socket_mode_enabled: false,
      token_rotation_enabled: false,
    },
  };
}
