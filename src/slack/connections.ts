/**
 * Slack connections (one app installation in one workspace). Signing secrets, client secrets, bot
 * tokens and refresh tokens are sealed with AES-256-GCM (src/app/secrets.ts) before they reach
 * Postgres; only this module, src/slack/connection-lifecycle.ts and src/slack/tokens.ts (a
 * rotating token's refresh) open them, and the public view never carries them.
 */
import type { Selectable, Updateable } from 'kysely';
import { typeid } from 'typeid-js';
import { decryptSecret, encryptSecret, tryDecrypt, type SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import type { SlackTables } from './tables';
import type { SlackSigningSecrets } from './signature';
import type { TokenLifetime } from './tokens';
import type { TokenRotation } from './web-api';
import type { ThreadFollowUps } from './contract';
import { storedConversation } from './conversation-settings';

/** A connection id is a typeid: `emc_` + 26 base32 characters; the first one is 0-7 because the suffix is 128 bits. */
export const CONNECTION_ID_PATTERN = /^emc_[0-7][0-9a-hjkmnp-tv-z]{25}$/;

const newConnectionId = () => typeid('emc').toString();

export class SlackConnectionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SlackConnectionError';
  }
}

/** What the routes and activities work with, secrets opened. Never logged. */
export interface SlackConnection {
  id: string;
  organizationId: string;
  /** Null while a draft waits for its install. */
  teamId: string | null;
  apiAppId: string | null;
  /** Null while a draft waits for its credentials: nothing can be verified for it. */
  secrets: SlackSigningSecrets | null;
  botToken: string | null;
  botUserId: string | null;
  channels: string[] | null;
  enabled: boolean;
  disabledReason: string | null;
  /** Slack's refusal of chat.startStream for this connection, once remembered: its thread keeps to edits. */
  streamingRefused: string | null;
  /** Slack uninstalled the app: nothing is linked or routed for it until it is installed again. */
  uninstalled: boolean;
  /** With token rotation on, when the bot token expires and when it was issued (src/slack/tokens.ts); null when it never expires. */
  tokenLifetime: TokenLifetime | null;
  /** An Enterprise Grid org-wide install's organization (src/slack/ownership.ts). */
  enterpriseId: string | null;
  /** Its own follow-ups setting (src/slack/conversation-settings.ts); null: SLACK_THREAD_FOLLOW_UPS. */
  threadFollowUps: ThreadFollowUps | null;
  /** Slack's refusal of the assistant methods for it, once remembered: its threads keep to messages. */
  assistantRefused: string | null;
}

/**
 * Where a connection stands: `draft` until it has its signing secret and a workspace (set by the
 * OAuth install, or by the operator's `create`), `uninstalled` once Slack said so, `disabled`
 * when it does not route, `active` otherwise.
 */
export type SlackConnectionState = 'draft' | 'active' | 'disabled' | 'uninstalled';

/** What the API and the CLI show: no secret, no token. */
export interface SlackConnectionView {
  connectionId: string;
  organizationId: string;
  name: string | null;
  state: SlackConnectionState;
  teamId: string | null;
  teamName: string | null;
  appId: string | null;
  /** Not a secret: Slack puts it in every install link. */
  clientId: string | null;
  /** The client id, client secret and signing secret are all set. */
  hasCredentials: boolean;
  botUserId: string | null;
  hasBotToken: boolean;
  /** The app has token rotation on: its bot token expires and is refreshed before it does. */
  tokenRotation: boolean;
  /** When the current rotating bot token expires. */
  tokenExpiresAt: string | null;
  /** An Enterprise Grid org-wide install's organization. */
  enterpriseId: string | null;
  channels: string[] | null;
  enabled: boolean;
  disabledReason: string | null;
  previousSecretExpiresAt: string | null;
  /** The last minute Slack said it dropped this app's events for the workspace (`app_rate_limited`). */
  eventsRateLimitedAt: string | null;
  /** How many such minutes Slack has reported. */
  eventsRateLimitedMinutes: number;
  installedAt: string | null;
  uninstalledAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** A row as stored (secrets still sealed). */
export type SlackConnectionRow = Selectable<SlackTables['slack_connections']>;

function connectionState(
  row: Pick<SlackConnectionRow, 'uninstalled_at' | 'team_id' | 'api_app_id' | 'signing_secret' | 'enabled'>,
): SlackConnectionState {
  if (row.uninstalled_at !== null) return 'uninstalled';
  if (row.team_id === null || row.api_app_id === null || row.signing_secret === null) return 'draft';
  return row.enabled ? 'active' : 'disabled';
}

const iso = (date: Date | null) => (date ? date.toISOString() : null);

export function connectionView(row: SlackConnectionRow): SlackConnectionView {
  return {
    connectionId: row.id,
    organizationId: row.organization_id,
    name: row.name,
    state: connectionState(row),
    teamId: row.team_id,
    teamName: row.team_name,
    appId: row.api_app_id,
    clientId: row.client_id,
    hasCredentials: row.client_id !== null && row.client_secret !== null && row.signing_secret !== null,
    botUserId: row.bot_user_id,
    hasBotToken: row.bot_token !== null,
    tokenRotation: row.refresh_token !== null,
    tokenExpiresAt: row.refresh_token !== null ? iso(row.token_expires_at) : null,
    enterpriseId: row.enterprise_id,
    channels: row.channels && row.channels.length > 0 ? row.channels : null,
    enabled: row.enabled,
    disabledReason: row.disabled_reason,
    previousSecretExpiresAt: iso(row.previous_secret_expires_at),
    eventsRateLimitedAt: iso(row.events_rate_limited_at),
    eventsRateLimitedMinutes: row.events_rate_limited_minutes,
    installedAt: iso(row.installed_at),
    uninstalledAt: iso(row.uninstalled_at),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}
const view = connectionView;

export interface CreateSlackConnectionInput {
  organizationId: string;
  teamId: string;
  apiAppId: string;
  signingSecret: string;
  botToken?: string;
  /** With token rotation on: the bot token's refresh token and lifetime (a refresh needs the client credentials too). */
  rotation?: TokenRotation;
  clientId?: string;
  clientSecret?: string;
  botUserId?: string;
  /** An Enterprise Grid org-wide install's organization. */
  enterpriseId?: string;
  channels?: string[];
  enabled?: boolean;
}

/** The database and the key the connections' secrets are sealed with. */
export interface SecretStore {
  db: Db;
  secretKey: SecretKeys | Buffer;
}

/** A bot token as it is stored: the token (none removes it), its rotation (none: it never expires), and when it was issued. */
interface IssuedBotToken {
  token: string | null;
  rotation: TokenRotation | null;
  issuedAt: Date;
}

/** The columns of a bot token: sealed, with its rotation's refresh token and lifetime, or none. */
export function botTokenColumns(key: SecretKeys | Buffer, { token, rotation, issuedAt }: IssuedBotToken) {
  return {
    bot_token: token === null ? null : encryptSecret(key, token),
    refresh_token: token === null || rotation === null ? null : encryptSecret(key, rotation.refreshToken),
    token_expires_at: token === null || rotation === null ? null : new Date(issuedAt.getTime() + rotation.expiresInMs),
    token_issued_at: token === null || rotation === null ? null : issuedAt,
  };
}

async function requireOrganization(db: Db, organizationId: string): Promise<void> {
  const org = await db.selectFrom('organizations').select('id').where('id', '=', organizationId).executeTakeFirst();
  if (!org) throw new SlackConnectionError(`organization ${organizationId} not found`);
}

/** An operator's connection (`den slack connections create`): the workspace, the app and the signing secret known at once. */
export async function createSlackConnection({ db, secretKey: key }: SecretStore, input: CreateSlackConnectionInput, now = new Date()) {
  await requireOrganization(db, input.organizationId);
  const id = newConnectionId();
  await db
    .insertInto('slack_connections')
    .values({
      id,
      organization_id: input.organizationId,
      team_id: input.teamId,
      api_app_id: input.apiAppId,
      signing_secret: encryptSecret(key, input.signingSecret),
      ...botTokenColumns(key, { token: input.botToken || null, rotation: input.rotation ?? null, issuedAt: now }),
      client_id: input.clientId ?? null,
      client_secret: input.clientSecret ? encryptSecret(key, input.clientSecret) : null,
      bot_user_id: input.botUserId ?? null,
      enterprise_id: input.enterpriseId ?? null,
      channels: input.channels && input.channels.length > 0 ? input.channels : null,
      enabled: input.enabled ?? true,
      disabled_reason: input.enabled === false ? 'operator' : null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  return { connectionId: id };
}

/**
 * A draft made through the API: no workspace, app or secret yet. Its manifest names it; its
 * credentials come next (setSlackCredentials), then Slack's OAuth install binds it.
 */
export async function createSlackConnectionDraft(
  db: Db,
  input: { organizationId: string; name: string; channels?: string[] },
  now = new Date(),
): Promise<SlackConnectionView> {
  await requireOrganization(db, input.organizationId);
  const row = await db
    .insertInto('slack_connections')
    .values({
      id: newConnectionId(),
      organization_id: input.organizationId,
      name: input.name,
      channels: input.channels && input.channels.length > 0 ? input.channels : null,
      enabled: true,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return view(row);
}

/** A connection's new app credentials, and when they were set. */
interface CredentialsChange {
  connectionId: string;
  credentials: { clientId: string; clientSecret: string; signingSecret: string };
  now?: Date;
}

/**
 * The app's credentials from its *Basic Information* page, sealed. A new signing secret counts at
 * once (the old one stops): the verifier rereads a connection's secrets whenever a signature fails.
 */
export async function setSlackCredentials(
  { db, secretKey: key }: SecretStore,
  { connectionId: id, credentials, now = new Date() }: CredentialsChange,
): Promise<SlackConnectionView | undefined> {
  const row = await db
    .updateTable('slack_connections')
    .set({
      client_id: credentials.clientId,
      client_secret: encryptSecret(key, credentials.clientSecret),
      signing_secret: encryptSecret(key, credentials.signingSecret),
      previous_signing_secret: null,
      previous_secret_expires_at: null,
      updated_at: now,
    })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row && view(row);
}

export interface UpdateSlackConnectionInput {
  enabled?: boolean;
  signingSecret?: string;
  /** With a new signing secret: how long the old one keeps verifying. 0 or absent = not at all. */
  previousSecretValidHours?: number;
  /** An empty list clears the allowlist. */
  channels?: string[];
  botToken?: string;
  /** With a new bot token: its rotation (absent: the new token never expires). */
  rotation?: TokenRotation;
  botUserId?: string;
}

/** What to change in which connection, and when. */
interface ConnectionChange {
  connectionId: string;
  change: UpdateSlackConnectionInput;
  now?: Date;
}

export async function updateSlackConnection(
  { db, secretKey: key }: SecretStore,
  { connectionId: id, change: input, now = new Date() }: ConnectionChange,
) {
  return db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('slack_connections').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
    if (!row) throw new SlackConnectionError(`Slack connection ${id} not found`);
    const patch: Updateable<SlackTables['slack_connections']> = { updated_at: now };
    if (input.enabled !== undefined) {
      patch.enabled = input.enabled;
      patch.disabled_reason = input.enabled ? null : 'operator';
    }
    if (input.signingSecret !== undefined) {
      patch.signing_secret = encryptSecret(key, input.signingSecret);
      const hours = input.previousSecretValidHours ?? 0;
      // Rotation: the old secret keeps verifying for a while, so deliveries Slack signed before
      // the switch (and their retries) still pass. Default: a rotated secret stops at once.
      patch.previous_signing_secret = hours > 0 ? row.signing_secret : null;
      patch.previous_secret_expires_at = hours > 0 ? new Date(now.getTime() + hours * 3_600_000) : null;
    }
    if (input.channels !== undefined) patch.channels = input.channels.length > 0 ? input.channels : null;
    if (input.botToken !== undefined) {
      if (input.rotation && (row.client_id === null || row.client_secret === null)) {
        throw new SlackConnectionError(
          'a rotating token needs the app’s client id and secret to be refreshed with: set its credentials first',
        );
      }
      Object.assign(patch, botTokenColumns(key, { token: input.botToken || null, rotation: input.rotation ?? null, issuedAt: now }));
      // A new token may carry what streaming lacked (a scope, a reinstall): its threads try it again.
      patch.streaming_refused = null;
      patch.streaming_refused_at = null;
      // And what the assistant methods lacked.
      patch.assistant_refused = null;
      patch.assistant_refused_at = null;
    }
    if (input.botUserId !== undefined) patch.bot_user_id = input.botUserId || null;
    const updated = await trx.updateTable('slack_connections').set(patch).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
    return view(updated);
  });
}

/** One connection of the organization, or undefined (another organization's is not found either). */
export async function getSlackConnectionView(db: Db, organizationId: string, id: string): Promise<SlackConnectionView | undefined> {
  const row = await db
    .selectFrom('slack_connections')
    .selectAll()
    .where('id', '=', id)
    .where('organization_id', '=', organizationId)
    .executeTakeFirst();
  return row && view(row);
}

export async function listSlackConnections(db: Db, organizationId: string): Promise<SlackConnectionView[]> {
  const rows = await db
    .selectFrom('slack_connections')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .orderBy('created_at')
    .execute();
  return rows.map(view);
}

/** A connection's signing secrets as stored (sealed): src/slack/verify.ts caches them and opens them only when they change. */
export interface SealedSigningSecrets {
  current: string;
  previous: string | null;
  previousExpiresAt: number | null;
}

type SealedColumns = Pick<SlackConnectionRow, 'signing_secret' | 'previous_signing_secret' | 'previous_secret_expires_at'>;

/** A row's signing secrets, sealed; none for a draft that has no signing secret yet. */
const sealedOf = (row: SealedColumns): SealedSigningSecrets | undefined =>
  row.signing_secret === null
    ? undefined
    : {
        current: row.signing_secret,
        previous: row.previous_signing_secret,
        previousExpiresAt: row.previous_secret_expires_at?.getTime() ?? null,
      };

/** The signing secrets, opened: the current one, and the one before a rotation while it still counts. */
export function openSigningSecrets(key: SecretKeys | Buffer, sealed: SealedSigningSecrets): SlackSigningSecrets {
  return {
    current: decryptSecret(key, sealed.current),
    previous:
      sealed.previous && sealed.previousExpiresAt !== null
        ? { secret: decryptSecret(key, sealed.previous), expiresAt: sealed.previousExpiresAt }
        : undefined,
  };
}

export async function findSlackConnection(db: Db, key: SecretKeys | Buffer, id: string): Promise<SlackConnection | undefined> {
  const row = await db.selectFrom('slack_connections').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) return undefined;
  const sealed = sealedOf(row);
  return {
    id: row.id,
    organizationId: row.organization_id,
    teamId: row.team_id,
    apiAppId: row.api_app_id,
    secrets: sealed ? openSigningSecrets(key, sealed) : null,
    botToken: row.bot_token ? decryptSecret(key, row.bot_token) : null,
    botUserId: row.bot_user_id,
    channels: row.channels && row.channels.length > 0 ? row.channels : null,
    enabled: row.enabled,
    disabledReason: row.disabled_reason,
    streamingRefused: row.streaming_refused,
    uninstalled: row.uninstalled_at !== null,
    tokenLifetime:
      row.refresh_token !== null && row.token_expires_at !== null
        ? { expiresAt: row.token_expires_at.getTime(), issuedAt: (row.token_issued_at ?? row.token_expires_at).getTime() }
        : null,
    enterpriseId: row.enterprise_id,
    threadFollowUps: storedConversation(row).threadFollowUps,
    assistantRefused: row.assistant_refused,
  };
}

/** What Slack refused a connection (its error), and when. */
interface MethodRefusal {
  connectionId: string;
  error: string;
  now?: Date;
}

/** Slack refused chat.startStream for this connection: remembered, so its threads keep to edits. */
export async function rememberStreamingRefused(db: Db, { connectionId, error, now = new Date() }: MethodRefusal): Promise<void> {
  await db
    .updateTable('slack_connections')
    .set({ streaming_refused: error, streaming_refused_at: now })
    .where('id', '=', connectionId)
    .where('streaming_refused', 'is', null)
    .execute();
}

/**
 * The sealed signing secrets of the connections among `ids` that have one, in one query
 * (src/slack/verify.ts batches these). A draft without its signing secret is left out: to a
 * signed request, it is a connection that does not exist, so it never answers an unsigned challenge.
 */
export async function findSealedSigningSecrets(db: Db, ids: string[]): Promise<Map<string, SealedSigningSecrets>> {
  const rows = await db
    .selectFrom('slack_connections')
    .select(['id', 'signing_secret', 'previous_signing_secret', 'previous_secret_expires_at'])
    .where('id', 'in', ids)
    .where('signing_secret', 'is not', null)
    .execute();
  return new Map(rows.flatMap((row) => (sealedOf(row) ? [[row.id, sealedOf(row)!] as const] : [])));
}

/**
 * Slack said it drops the app's events for the connection's workspace from `minute` on
 * (`app_rate_limited`): remembered, each minute counted once (Slack's retries of the same notice
 * change nothing). Whether it was a minute not seen before.
 */
export async function recordEventsRateLimited(
  db: Db,
  { connectionId: id, minute, now = new Date() }: { connectionId: string; minute: Date; now?: Date },
): Promise<boolean> {
  const result = await db
    .updateTable('slack_connections')
    .set((eb) => ({
      events_rate_limited_at: minute,
      events_rate_limited_minutes: eb('events_rate_limited_minutes', '+', 1),
      updated_at: now,
    }))
    .where('id', '=', id)
    .where((eb) => eb.or([eb('events_rate_limited_at', 'is', null), eb('events_rate_limited_at', '<>', minute)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** app_uninstalled / tokens_revoked (through the workflow) and operators. Idempotent. */
export async function disableSlackConnection(
  db: Db,
  { connectionId, reason, now = new Date() }: { connectionId: string; reason: string; now?: Date },
): Promise<boolean> {
  const result = await db
    .updateTable('slack_connections')
    .set({ enabled: false, disabled_reason: reason, updated_at: now })
    .where('id', '=', connectionId)
    .where('enabled', '=', true)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Re-seals every stored Slack secret with the current key (`den secrets rotate`), opening each
 * with whichever key still can. Idempotent; a secret neither key opens is counted, not changed.
 */
export async function resealSlackSecrets(db: Db, keys: SecretKeys): Promise<{ resealed: number; current: number; undecryptable: number }> {
  const counts = { resealed: 0, current: 0, undecryptable: 0 };
  const rows = await db
    .selectFrom('slack_connections')
    .select(['id', 'signing_secret', 'previous_signing_secret', 'bot_token', 'client_secret', 'refresh_token'])
    .execute();
  for (const row of rows) {
    const patch: Record<string, string> = {};
    for (const column of ['signing_secret', 'previous_signing_secret', 'bot_token', 'client_secret', 'refresh_token'] as const) {
      const sealed = row[column];
      if (sealed === null) continue;
      if (tryDecrypt(keys.current, sealed) !== undefined) {
        counts.current += 1;
        continue;
      }
      const opened = keys.previous ? tryDecrypt(keys.previous, sealed) : undefined;
      if (opened === undefined) {
        counts.undecryptable += 1;
        continue;
      }
      patch[column] = encryptSecret(keys, opened);
      counts.resealed += 1;
    }
    if (Object.keys(patch).length > 0) await db.updateTable('slack_connections').set(patch).where('id', '=', row.id).execute();
  }
  return counts;
}
