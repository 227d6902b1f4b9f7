/**
 * Slack connections (one app installation in one workspace). Signing secrets and bot tokens are
 * sealed with AES-256-GCM (src/app/secrets.ts) before they reach Postgres; only this module opens
 * them, and the public view never carries them.
 */
import type { Selectable } from 'kysely';
import { typeid } from 'typeid-js';
import { decryptSecret, encryptSecret, tryDecrypt, type SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import type { SlackTables } from './tables';
import type { SlackSigningSecrets } from './signature';

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
  teamId: string;
  apiAppId: string;
  secrets: SlackSigningSecrets;
  botToken: string | null;
  botUserId: string | null;
  channels: string[] | null;
  enabled: boolean;
  disabledReason: string | null;
  /** Slack's refusal of chat.startStream for this connection, once remembered: its thread keeps to edits. */
  streamingRefused: string | null;
}

/** What the CLI prints: no secret, no token. */
export interface SlackConnectionView {
  connectionId: string;
  organizationId: string;
  teamId: string;
  appId: string;
  botUserId: string | null;
  hasBotToken: boolean;
  channels: string[] | null;
  enabled: boolean;
  disabledReason: string | null;
  previousSecretExpiresAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** A row as stored (secrets still sealed). */
type Row = Selectable<SlackTables['slack_connections']>;

function view(row: Row): SlackConnectionView {
  return {
    connectionId: row.id,
    organizationId: row.organization_id,
    teamId: row.team_id,
    appId: row.api_app_id,
    botUserId: row.bot_user_id,
    hasBotToken: row.bot_token !== null,
    channels: row.channels && row.channels.length > 0 ? row.channels : null,
    enabled: row.enabled,
    disabledReason: row.disabled_reason,
    previousSecretExpiresAt: row.previous_secret_expires_at ? row.previous_secret_expires_at.toISOString() : null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export interface CreateSlackConnectionInput {
  organizationId: string;
  teamId: string;
  apiAppId: string;
  signingSecret: string;
  botToken?: string;
  botUserId?: string;
  channels?: string[];
  enabled?: boolean;
}

export async function createSlackConnection(db: Db, key: SecretKeys | Buffer, input: CreateSlackConnectionInput, now = new Date()) {
  const org = await db.selectFrom('organizations').select('id').where('id', '=', input.organizationId).executeTakeFirst();
  if (!org) throw new SlackConnectionError(`organization ${input.organizationId} not found`);
  const id = newConnectionId();
  await db
    .insertInto('slack_connections')
    .values({
      id,
      organization_id: input.organizationId,
      team_id: input.teamId,
      api_app_id: input.apiAppId,
      signing_secret: encryptSecret(key, input.signingSecret),
      bot_token: input.botToken ? encryptSecret(key, input.botToken) : null,
      bot_user_id: input.botUserId ?? null,
      channels: input.channels && input.channels.length > 0 ? input.channels : null,
      enabled: input.enabled ?? true,
      disabled_reason: input.enabled === false ? 'operator' : null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  return { connectionId: id };
}

export interface UpdateSlackConnectionInput {
  enabled?: boolean;
  signingSecret?: string;
  /** With a new signing secret: how long the old one keeps verifying. 0 or absent = not at all. */
  previousSecretValidHours?: number;
  /** An empty list clears the allowlist. */
  channels?: string[];
  botToken?: string;
  botUserId?: string;
}

export async function updateSlackConnection(
  db: Db,
  key: SecretKeys | Buffer,
  id: string,
  input: UpdateSlackConnectionInput,
  now = new Date(),
) {
  return db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('slack_connections').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
    if (!row) throw new SlackConnectionError(`Slack connection ${id} not found`);
    const patch: Partial<Row> = { updated_at: now };
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
      patch.bot_token = input.botToken ? encryptSecret(key, input.botToken) : null;
      // A new token may carry what streaming lacked (a scope, a reinstall): its threads try it again.
      patch.streaming_refused = null;
      patch.streaming_refused_at = null;
    }
    if (input.botUserId !== undefined) patch.bot_user_id = input.botUserId || null;
    const updated = await trx.updateTable('slack_connections').set(patch).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
    return view(updated);
  });
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

const sealedOf = (row: Pick<Row, 'signing_secret' | 'previous_signing_secret' | 'previous_secret_expires_at'>): SealedSigningSecrets => ({
  current: row.signing_secret,
  previous: row.previous_signing_secret,
  previousExpiresAt: row.previous_secret_expires_at?.getTime() ?? null,
});

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
  return {
    id: row.id,
    organizationId: row.organization_id,
    teamId: row.team_id,
    apiAppId: row.api_app_id,
    secrets: openSigningSecrets(key, sealedOf(row)),
    botToken: row.bot_token ? decryptSecret(key, row.bot_token) : null,
    botUserId: row.bot_user_id,
    channels: row.channels && row.channels.length > 0 ? row.channels : null,
    enabled: row.enabled,
    disabledReason: row.disabled_reason,
    streamingRefused: row.streaming_refused,
  };
}

/** Slack refused chat.startStream for this connection: remembered, so its threads keep to edits. */
export async function rememberStreamingRefused(db: Db, id: string, error: string, now = new Date()): Promise<void> {
  await db
    .updateTable('slack_connections')
    .set({ streaming_refused: error, streaming_refused_at: now })
    .where('id', '=', id)
    .where('streaming_refused', 'is', null)
    .execute();
}

/** The sealed signing secrets of the connections among `ids` that exist, in one query (src/slack/verify.ts batches these). */
export async function findSealedSigningSecrets(db: Db, ids: string[]): Promise<Map<string, SealedSigningSecrets>> {
  const rows = await db
    .selectFrom('slack_connections')
    .select(['id', 'signing_secret', 'previous_signing_secret', 'previous_secret_expires_at'])
    .where('id', 'in', ids)
    .execute();
  return new Map(rows.map((row) => [row.id, sealedOf(row)]));
}

/** app_uninstalled / tokens_revoked (through the workflow) and operators. Idempotent. */
export async function disableSlackConnection(db: Db, id: string, reason: string, now = new Date()): Promise<boolean> {
  const result = await db
    .updateTable('slack_connections')
    .set({ enabled: false, disabled_reason: reason, updated_at: now })
    .where('id', '=', id)
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
  const rows = await db.selectFrom('slack_connections').select(['id', 'signing_secret', 'previous_signing_secret', 'bot_token']).execute();
  for (const row of rows) {
    const patch: Record<string, string> = {};
    for (const column of ['signing_secret', 'previous_signing_secret', 'bot_token'] as const) {
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
