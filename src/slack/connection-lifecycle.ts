/**
 * What changes a connection as a whole: Slack's OAuth install binding it to its workspace and app
 * (a reinstall replaces the token), Slack uninstalling the app (`app_uninstalled`), and an admin
 * removing it. The last two end the invocations that wait for a member's link: their workflows are
 * told inside the transaction that removes their rows, so if Temporal cannot take the signals
 * nothing is removed and the caller tries again (as src/slack/links.ts does for a link).
 *
 * Every change takes the connection's row lock first; src/slack/links.ts `linkOrWait` takes a
 * share lock on the same row before it records a waiting invocation, so an invocation either
 * starts waiting before the removal (and is ended by it) or sees the removal and does not wait.
 */
import { sql } from 'kysely';
import { decryptSecret, type SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import { botTokenColumns, connectionView, type SecretStore, type SlackConnectionView } from './connections';
import type { TokenRotation } from './web-api';

/** Why an install was not recorded. */
export type InstallRefusal = 'not_found' | 'team_mismatch' | 'app_mismatch' | 'bound_elsewhere';

export type InstallOutcome = { ok: true; reinstall: boolean; connection: SlackConnectionView } | { ok: false; reason: InstallRefusal };

/** What Slack's `oauth.v2.access` answered, and who asked for the install. */
export interface SlackInstall {
  connectionId: string;
  organizationId: string;
  memberId: string;
  teamId: string;
  teamName: string | null;
  appId: string;
  botToken: string;
  /** With token rotation on: the refresh token and the bot token's lifetime. */
  rotation: TokenRotation | null;
  botUserId: string | null;
}

/** Reasons a lifecycle event or an operator disabled a connection with; a reinstall clears the lifecycle's, not the operator's. */
const CLEARED_BY_REINSTALL = new Set(['app_uninstalled', 'tokens_revoked']);

/**
 * Binds the install to its connection: the workspace and app must be the ones the connection is
 * bound to already (an operator's connection, a reinstall), and no other connection may hold the
 * same workspace and app. A reinstall replaces the bot token (and its rotation, on or off); an app
 * Slack uninstalled is active again.
 */
export async function recordSlackInstall({ db, secretKey }: SecretStore, install: SlackInstall, now = new Date()): Promise<InstallOutcome> {
  return db.transaction().execute(async (trx): Promise<InstallOutcome> => {
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`slack-app:${install.teamId}:${install.appId}`}, 0))`.execute(trx);
    const row = await trx
      .selectFrom('slack_connections')
      .selectAll()
      .where('id', '=', install.connectionId)
      .where('organization_id', '=', install.organizationId)
      .forUpdate()
      .executeTakeFirst();
    if (!row) return { ok: false, reason: 'not_found' };
    if (row.team_id !== null && row.team_id !== install.teamId) return { ok: false, reason: 'team_mismatch' };
    if (row.api_app_id !== null && row.api_app_id !== install.appId) return { ok: false, reason: 'app_mismatch' };
    const elsewhere = await trx
      .selectFrom('slack_connections')
      .select('id')
      .where('team_id', '=', install.teamId)
      .where('api_app_id', '=', install.appId)
      .where('id', '<>', install.connectionId)
      .executeTakeFirst();
    if (elsewhere) return { ok: false, reason: 'bound_elsewhere' };
    const reenable = !row.enabled && row.disabled_reason !== null && CLEARED_BY_REINSTALL.has(row.disabled_reason);
    const updated = await trx
      .updateTable('slack_connections')
      .set({
        team_id: install.teamId,
        api_app_id: install.appId,
        team_name: install.teamName,
        ...botTokenColumns(secretKey, { token: install.botToken, rotation: install.rotation, issuedAt: now }),
        bot_user_id: install.botUserId,
        installed_at: now,
        installed_by: install.memberId,
        uninstalled_at: null,
        // A new token may carry what streaming lacked: its threads try it again.
        streaming_refused: null,
        streaming_refused_at: null,
        ...(reenable ? { enabled: true, disabled_reason: null } : {}),
        updated_at: now,
      })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { ok: true, reinstall: row.installed_at !== null || row.bot_token !== null, connection: connectionView(updated) };
  });
}

/** The client credentials the OAuth exchange needs, opened; undefined for another organization's connection or none. */
export async function findClientCredentials(
  db: Db,
  key: SecretKeys | Buffer,
  connectionId: string,
): Promise<{ organizationId: string; clientId: string | null; clientSecret: string | null } | undefined> {
  const row = await db
    .selectFrom('slack_connections')
    .select(['organization_id', 'client_id', 'client_secret'])
    .where('id', '=', connectionId)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    organizationId: row.organization_id,
    clientId: row.client_id,
    clientSecret: row.client_secret === null ? null : decryptSecret(key, row.client_secret),
  };
}

/** The bot token an admin's removal revokes, opened; undefined when the organization has no such connection. */
export async function findBotTokenForRemoval(
  { db, secretKey: key }: SecretStore,
  organizationId: string,
  connectionId: string,
): Promise<{ botToken: string | null } | undefined> {
  const row = await db
    .selectFrom('slack_connections')
    .select('bot_token')
    .where('id', '=', connectionId)
    .where('organization_id', '=', organizationId)
    .executeTakeFirst();
  if (!row) return undefined;
  return { botToken: row.bot_token === null ? null : decryptSecret(key, row.bot_token) };
}

/** Tells the workflows of waiting invocations that their connection is gone; throwing rolls the change back. */
export type NotifyRemoved = (workflowIds: string[]) => Promise<void>;

export interface Removal {
  links: number;
  waiting: number;
}

/** Which connection goes: its id, and the organization it must belong to. */
interface OwnedConnection {
  organizationId: string;
  connectionId: string;
}

/**
 * `app_uninstalled`: the connection is marked uninstalled and stops routing, its token (which
 * Slack has revoked) is dropped, its member links and link codes removed, and its waiting
 * invocations told. Idempotent: Slack's retries find nothing more to do.
 */
export async function uninstallSlackConnection(
  db: Db,
  { connectionId: id, now = new Date() }: { connectionId: string; now?: Date },
  notify: NotifyRemoved,
): Promise<Removal | undefined> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('slack_connections')
      .select(['id', 'uninstalled_at'])
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    if (!row) return undefined;
    await trx
      .updateTable('slack_connections')
      .set({
        uninstalled_at: row.uninstalled_at ?? now,
        enabled: false,
        disabled_reason: 'app_uninstalled',
        bot_token: null,
        updated_at: now,
      })
      .where('id', '=', id)
      .execute();
    const links = await trx.deleteFrom('slack_account_links').where('connection_id', '=', id).executeTakeFirst();
    await trx.deleteFrom('slack_link_codes').where('connection_id', '=', id).execute();
    const waiting = await trx.deleteFrom('slack_pending_invocations').where('connection_id', '=', id).returning('workflow_id').execute();
    await notify(waiting.map((w) => w.workflow_id));
    return { links: Number(links.numDeletedRows), waiting: waiting.length };
  });
}

/**
 * An admin's removal: the connection and everything of it (member links, link codes, used link
 * tokens, waiting and counted invocations, by their foreign keys; its Web API budget), its waiting
 * invocations told. Undefined when the organization has no such connection.
 */
export async function removeSlackConnection(
  db: Db,
  { organizationId, connectionId: id }: OwnedConnection,
  notify: NotifyRemoved,
): Promise<Removal | undefined> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('slack_connections')
      .select('id')
      .where('id', '=', id)
      .where('organization_id', '=', organizationId)
      .forUpdate()
      .executeTakeFirst();
    if (!row) return undefined;
    const waiting = await trx.selectFrom('slack_pending_invocations').select('workflow_id').where('connection_id', '=', id).execute();
    const links = await trx
      .selectFrom('slack_account_links')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('connection_id', '=', id)
      .executeTakeFirstOrThrow();
    await trx.deleteFrom('slack_api_budgets').where('connection_id', '=', id).execute();
    await trx.deleteFrom('slack_connections').where('id', '=', id).execute();
    await notify(waiting.map((w) => w.workflow_id));
    return { links: Number(links.n), waiting: waiting.length };
  });
}
