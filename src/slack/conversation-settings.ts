/**
 * A connection's conversation settings and what its Slack app is known to have.
 *
 * - `threadFollowUps` (`off`, `asker`, `members`; null: SLACK_THREAD_FOLLOW_UPS) and
 *   `suggestedPrompts` (null: the defaults of src/slack/assistant.ts), set with `PATCH`.
 * - What the app has: the scopes and events of the manifest a draft was made from, then, at each
 *   OAuth install, the scopes Slack granted and the events of the manifest the service hands out
 *   at that moment (the install is the step that follows applying a manifest). Unknown (an
 *   operator's connection, one made before this): what apps had before (EARLIER_APP).
 * - `manifestOutdated`: the app lacks a scope or an event its settings need; the manifest to apply
 *   comes with it.
 * - Slack's refusal of the assistant methods, remembered until the bot token is replaced.
 */
import type { Db } from '../app/store/db';
import { promptsOf, type SuggestedPrompt } from './assistant';
import type { ThreadFollowUps } from './contract';
import { appLacks, manifestNeeds } from './manifest';

/** What the connection row holds of its conversation. */
export interface StoredConversation {
  threadFollowUps: ThreadFollowUps | null;
  suggestedPrompts: SuggestedPrompt[] | null;
  appScopes: string[] | null;
  appEvents: string[] | null;
  assistantRefused: string | null;
}

/** The conversation settings in force: the connection's own, else the service's defaults. */
export interface ConversationSettings {
  threadFollowUps: ThreadFollowUps;
  suggestedPrompts: SuggestedPrompt[];
}

export function effectiveConversation(stored: StoredConversation | undefined, defaultFollowUps: ThreadFollowUps): ConversationSettings {
  return {
    threadFollowUps: stored?.threadFollowUps ?? defaultFollowUps,
    suggestedPrompts: promptsOf(stored?.suggestedPrompts),
  };
}

/** The app against what its settings need: what it lacks, and so whether its manifest must be applied again. */
export function appStatus(stored: StoredConversation | undefined, settings: ConversationSettings) {
  const lacks = appLacks({ scopes: stored?.appScopes ?? null, events: stored?.appEvents ?? null }, manifestNeeds(settings));
  return { manifestOutdated: lacks.scopes.length > 0 || lacks.events.length > 0, appLacks: lacks };
}

const FOLLOW_UPS: readonly string[] = ['off', 'asker', 'members'];

type ConversationColumns = {
  id: string;
  thread_follow_ups: string | null;
  suggested_prompts: unknown;
  app_scopes: string[] | null;
  app_events: string[] | null;
  assistant_refused: string | null;
};

export function storedConversation(row: Omit<ConversationColumns, 'id'>): StoredConversation {
  return {
    threadFollowUps:
      row.thread_follow_ups !== null && FOLLOW_UPS.includes(row.thread_follow_ups) ? (row.thread_follow_ups as ThreadFollowUps) : null,
    suggestedPrompts: Array.isArray(row.suggested_prompts) ? (row.suggested_prompts as SuggestedPrompt[]) : null,
    appScopes: row.app_scopes,
    appEvents: row.app_events,
    assistantRefused: row.assistant_refused,
  };
}

/** The conversation columns of these connections, in one query. */
export async function loadConversations(db: Db, ids: string[]): Promise<Map<string, StoredConversation>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('slack_connections')
    .select(['id', 'thread_follow_ups', 'suggested_prompts', 'app_scopes', 'app_events', 'assistant_refused'])
    .where('id', 'in', ids)
    .execute();
  return new Map(rows.map((row) => [row.id, storedConversation(row)]));
}

/** What a `PATCH` changes in a connection's conversation, and when. */
interface ConversationChange {
  connectionId: string;
  change: { threadFollowUps?: ThreadFollowUps; suggestedPrompts?: SuggestedPrompt[] };
  now: Date;
}

/** Sets what `PATCH` names; absent fields stay as they are. */
export async function updateConversation(db: Db, { connectionId: id, change, now }: ConversationChange): Promise<void> {
  if (change.threadFollowUps === undefined && change.suggestedPrompts === undefined) return;
  await db
    .updateTable('slack_connections')
    .set({
      ...(change.threadFollowUps !== undefined ? { thread_follow_ups: change.threadFollowUps } : {}),
      ...(change.suggestedPrompts !== undefined ? { suggested_prompts: JSON.stringify(change.suggestedPrompts) } : {}),
      updated_at: now,
    })
    .where('id', '=', id)
    .execute();
}

/**
 * What the app is known to have: its manifest's scopes and events when a draft is made from it, or
 * Slack's grant and the manifest of the moment at an install. A new install's token may carry what
 * the assistant methods lacked: its threads try them again.
 */
export async function recordAppHas(db: Db, id: string, app: { scopes: string[]; events: string[] }): Promise<void> {
  await db
    .updateTable('slack_connections')
    .set({ app_scopes: app.scopes, app_events: app.events, assistant_refused: null, assistant_refused_at: null })
    .where('id', '=', id)
    .execute();
}

/**
 * An install: the scopes Slack granted (else the manifest's), and the events of the manifest the
 * connection's settings ask for now, which the admin applied before installing.
 */
export async function recordInstalledApp(
  db: Db,
  id: string,
  install: { grantedScopes: string[] | null; defaultFollowUps: ThreadFollowUps },
): Promise<void> {
  const stored = (await loadConversations(db, [id])).get(id);
  const needs = manifestNeeds(effectiveConversation(stored, install.defaultFollowUps));
  await recordAppHas(db, id, { scopes: install.grantedScopes ?? needs.scopes, events: needs.events });
}

/** Slack refused an assistant method for this connection: remembered, so its threads keep to messages. */
export async function rememberAssistantRefused(
  db: Db,
  { connectionId, error, now = new Date() }: { connectionId: string; error: string; now?: Date },
): Promise<void> {
  await db
    .updateTable('slack_connections')
    .set({ assistant_refused: error, assistant_refused_at: now })
    .where('id', '=', connectionId)
    .where('assistant_refused', 'is', null)
    .execute();
}
