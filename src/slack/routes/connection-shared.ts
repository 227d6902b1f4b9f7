/** What the routes that set up a connection share (admins only): the connection's shape, its manifest's, and its not-found answer. */
import { errors } from '../../app/errors';
import { authResponses } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import type { SlackConnectionView } from '../connections';
import { appStatus, effectiveConversation, loadConversations, type ConversationSettings } from '../conversation-settings';
import { slackAppManifest, type SlackAppManifest } from '../manifest';
import type { SlackRouteDeps } from './shared';

export const SLACK_TAGS = ['Slack'];

/** A Slack channel id (C…, G…): the allowlist holds ids, never names. */
const ChannelId = z.string().regex(/^[A-Z0-9]{2,32}$/, 'Must be a Slack channel id (upper-case letters and digits).');

export const ChannelIds = z
  .array(ChannelId)
  .max(1000)
  .openapi({ description: 'Channels where mentions are routed; empty: every channel. Direct messages are always allowed.' });

const nullableString = z.string().nullable();

/** An admin's suggested prompt for the app's thread: Slack shows its title and sends its message. */
export const SuggestedPromptBody = z
  .object({ title: z.string().trim().min(1).max(100), message: z.string().trim().min(1).max(1000) })
  .strict()
  .openapi('SlackSuggestedPrompt');

const ConversationFields = {
  threadFollowUps: z.enum(['off', 'asker', 'members']).openapi({
    description:
      'Whether a reply in a thread the app answered, without a mention, is for the bot: `off`, from the thread’s asker ' +
      '(`asker`), or from any linked member (`members`). Default SLACK_THREAD_FOLLOW_UPS.',
  }),
  suggestedPrompts: z.array(SuggestedPromptBody).openapi({ description: 'What the app’s thread suggests (up to four).' }),
  manifestOutdated: z.boolean().openapi({
    description: 'The Slack app lacks a scope or event these settings need: apply `manifest` to the app, then install it again.',
  }),
  appLacks: z
    .object({ scopes: z.array(z.string()), events: z.array(z.string()) })
    .openapi({ description: 'What the app is not known to have: empty lists when its manifest is current.' }),
  manifest: z
    .record(z.string(), z.unknown())
    .optional()
    .openapi({ description: 'Only when `manifestOutdated`: the manifest to apply (single-connection answers).' }),
};

export const SlackConnectionBody = z
  .object({
    connectionId: z.string(),
    organizationId: z.string(),
    name: nullableString.openapi({ description: "The app's name in its manifest." }),
    state: z.enum(['draft', 'active', 'disabled', 'uninstalled']).openapi({
      description:
        '`draft` until its credentials are set and it is installed through Slack’s OAuth; `uninstalled` once Slack said so; ' +
        '`disabled` when it does not route; `active` otherwise.',
    }),
    teamId: nullableString,
    teamName: nullableString,
    appId: nullableString,
    clientId: nullableString.openapi({ description: 'Not a secret: Slack puts it in every install link.' }),
    hasCredentials: z.boolean().openapi({ description: 'The client id, client secret and signing secret are set (never returned).' }),
    botUserId: nullableString,
    hasBotToken: z.boolean(),
    tokenRotation: z
      .boolean()
      .openapi({ description: 'The app has token rotation on: its bot token expires, and is refreshed before it does.' }),
    tokenExpiresAt: nullableString.openapi({ description: 'When the current rotating bot token expires.' }),
    enterpriseId: nullableString.openapi({ description: "An Enterprise Grid org-wide install's organization." }),
    channels: z.array(z.string()).nullable(),
    enabled: z.boolean(),
    disabledReason: nullableString,
    previousSecretExpiresAt: nullableString,
    eventsRateLimitedAt: nullableString.openapi({
      description: "The last minute Slack said it dropped this app's events for the workspace (the `app_rate_limited` event).",
    }),
    eventsRateLimitedMinutes: z.number().int().openapi({ description: 'How many such minutes Slack has reported.' }),
    installedAt: nullableString,
    uninstalledAt: nullableString,
    createdAt: z.string(),
    updatedAt: z.string(),
    ...ConversationFields,
  })
  .openapi('SlackConnection');

export const ManifestBody = z.record(z.string(), z.unknown()).openapi('SlackAppManifest', {
  description:
    "Slack's app manifest (JSON) for this connection: paste it into *Create New App → From a manifest*. Its Request URLs and " +
    'OAuth redirect URL point at this deployment (APP_BASE_URL).',
});

const NotFound = z.object({ error: z.literal('not_found'), message: z.string() });

export const connectionNotFound = () => errors.notFound('No such Slack connection.');

export const connectionResponses = {
  404: { description: "No such connection in the caller's organization (another organization's answers the same).", schema: NotFound },
  ...authResponses,
};

/** The manifest of a connection: its own name, else SLACK_APP_NAME; every URL on APP_BASE_URL; the events its settings need. */
export function manifestOf(
  deps: Pick<SlackRouteDeps, 'settings' | 'platform'>,
  connection: Pick<SlackConnectionView, 'connectionId' | 'name'>,
  conversation: ConversationSettings,
): SlackAppManifest {
  return slackAppManifest({
    name: connection.name ?? deps.settings.appName,
    publicBaseUrl: deps.platform.publicBaseUrl,
    connectionId: connection.connectionId,
    conversation,
  });
}

// ─── A connection's conversation, as the admin routes show it ─────────────────────────────────

/** The manifest of a connection as its settings are now (its conversation columns read). */
export async function currentManifest(
  deps: Pick<SlackRouteDeps, 'settings' | 'platform' | 'db'>,
  connection: Pick<SlackConnectionView, 'connectionId' | 'name'>,
): Promise<SlackAppManifest> {
  const stored = (await loadConversations(deps.db, [connection.connectionId])).get(connection.connectionId);
  return manifestOf(deps, connection, effectiveConversation(stored, deps.settings.threadFollowUps));
}

/**
 * Connections as the routes answer them: each with its conversation settings in force and whether
 * its app lacks what they need; `withManifest` (one connection's answer) adds the manifest to apply.
 */
export async function presentConnections(
  deps: Pick<SlackRouteDeps, 'settings' | 'platform' | 'db'>,
  views: SlackConnectionView[],
  withManifest = false,
) {
  const stored = await loadConversations(
    deps.db,
    views.map((view) => view.connectionId),
  );
  return views.map((view) => {
    const conversation = effectiveConversation(stored.get(view.connectionId), deps.settings.threadFollowUps);
    const status = appStatus(stored.get(view.connectionId), conversation);
    const manifest = withManifest && status.manifestOutdated ? { manifest: manifestOf(deps, view, conversation) } : {};
    return { ...view, ...conversation, ...status, ...manifest };
  });
}
