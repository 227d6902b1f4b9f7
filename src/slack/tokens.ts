/**
 * A connection's bot token, fresh. An app with token rotation on gets a bot token that expires
 * (every 12 hours) and a refresh token that trades it, once, for a new pair: `oauth.v2.access`
 * with `grant_type=refresh_token` and the app's client credentials
 * (https://docs.slack.dev/authentication/using-token-rotation). The pair is sealed like every
 * stored secret (src/app/secrets.ts).
 *
 * A rotating token is refreshed before it expires: once less than a tenth of its lifetime (at most
 * ten minutes) is left; and when Slack answers `token_expired` all the same. One refresh per
 * connection at a time, across every API replica and worker: under a Postgres advisory
 * transaction lock on the connection, the row read again inside it, so a caller that waited for
 * another's refresh finds the new token and does not spend the refresh token a second time (it
 * works once).
 */
import { sql } from 'kysely';
import { decryptSecret, encryptSecret, type SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import type { Logger } from '../app/log';
import { oauthV2Refresh } from './web-api';

/** A rotating token's expiry and when it was issued, in ms since the epoch. */
export interface TokenLifetime {
  expiresAt: number;
  issuedAt: number;
}

/** The most ahead of its expiry a token is refreshed. */
const MAX_REFRESH_AHEAD_MS = 10 * 60_000;

/** A rotating token is due once less than a tenth of its lifetime, at most ten minutes, is left. */
export function refreshDue(token: TokenLifetime, now: number): boolean {
  const ahead = Math.min(Math.max(0, token.expiresAt - token.issuedAt) / 10, MAX_REFRESH_AHEAD_MS);
  return now >= token.expiresAt - ahead;
}

/** What a refresh needs: the database, the key that seals the tokens, Slack's Web API, the log. */
export interface TokenDeps {
  db: Db;
  secretKey: SecretKeys | Buffer;
  apiBaseUrl: string;
  log?: Pick<Logger, 'info' | 'warn'>;
  now?: () => number;
}

/**
 * The token to call Slack with for a connection already read: its own, or a refreshed one when it
 * rotates and is due. A refresh that fails leaves it as it is: until it expires it still works,
 * and after, the call says so.
 */
export async function dueBotToken(
  deps: TokenDeps,
  connection: { id: string; botToken: string; tokenLifetime: TokenLifetime | null },
): Promise<string> {
  if (connection.tokenLifetime === null || !refreshDue(connection.tokenLifetime, (deps.now ?? Date.now)())) return connection.botToken;
  const fresh = await freshBotToken(deps, connection.id);
  return fresh.ok ? fresh.token : connection.botToken;
}

/** A bot token to call Slack with, or why there is none (the refresh refused or failed). */
export type FreshToken = { ok: true; token: string; refreshed: boolean } | { ok: false; error: string; retryable: boolean };

/**
 * The connection's bot token, refreshed first when it rotates and is due, or when `expired` (the
 * token Slack just answered `token_expired` to) is still the one stored.
 */
export async function freshBotToken(deps: TokenDeps, connectionId: string, expired?: string): Promise<FreshToken> {
  const now = deps.now ?? Date.now;
  return deps.db.transaction().execute(async (trx): Promise<FreshToken> => {
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`slack-token:${connectionId}`}, 0))`.execute(trx);
    const row = await trx
      .selectFrom('slack_connections')
      .select(['bot_token', 'refresh_token', 'token_expires_at', 'token_issued_at', 'client_id', 'client_secret', 'streaming_refused'])
      .where('id', '=', connectionId)
      .executeTakeFirst();
    if (!row?.bot_token) return { ok: false, error: 'no_bot_token', retryable: false };
    const current = decryptSecret(deps.secretKey, row.bot_token);
    if (row.refresh_token === null || row.token_expires_at === null) return { ok: true, token: current, refreshed: false };
    const lifetime = { expiresAt: row.token_expires_at.getTime(), issuedAt: (row.token_issued_at ?? row.token_expires_at).getTime() };
    const stale = expired !== undefined && expired === current;
    if (!stale && !refreshDue(lifetime, now())) return { ok: true, token: current, refreshed: false };
    if (row.client_id === null || row.client_secret === null) return { ok: false, error: 'credentials_missing', retryable: false };
    const answer = await oauthV2Refresh(deps.apiBaseUrl, {
      clientId: row.client_id,
      clientSecret: decryptSecret(deps.secretKey, row.client_secret),
      refreshToken: decryptSecret(deps.secretKey, row.refresh_token),
    });
    if (!answer.ok) {
      deps.log?.warn({ connectionId, error: answer.error }, 'slack: the bot token could not be refreshed');
      return { ok: false, error: answer.error, retryable: answer.retryable };
    }
    const issuedAt = now();
    await trx
      .updateTable('slack_connections')
      .set({
        bot_token: encryptSecret(deps.secretKey, answer.token.accessToken),
        refresh_token: encryptSecret(deps.secretKey, answer.token.refreshToken),
        token_expires_at: new Date(issuedAt + answer.token.expiresInMs),
        token_issued_at: new Date(issuedAt),
        // An expired token was once taken for a refusal of streaming: the fresh one streams.
        ...(row.streaming_refused === 'token_expired' ? { streaming_refused: null, streaming_refused_at: null } : {}),
        updated_at: new Date(issuedAt),
      })
      .where('id', '=', connectionId)
      .execute();
    deps.log?.info({ connectionId, expiresInMs: answer.token.expiresInMs }, 'slack: bot token refreshed');
    return { ok: true, token: answer.token.accessToken, refreshed: true };
  });
}
