import { type Kysely, sql } from 'kysely';

/**
 * Slack apps with token rotation on (https://docs.slack.dev/authentication/using-token-rotation):
 * the refresh token `oauth.v2.access` answers with an expiring bot token (sealed like the bot
 * token), when that token expires and when it was issued (a refresh is due once a tenth of its
 * lifetime is left). Also what else a connection now keeps of Slack: the Enterprise Grid
 * organization of an org-wide install (an event is the connection's when its `authorizations`
 * name it), and the last minute Slack said it dropped the app's events (`app_rate_limited`) with
 * how many such minutes it reported. An expired token was once remembered as a refusal of
 * streaming; that mark is cleared, since a refreshed token streams.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('slack_connections')
    .addColumn('refresh_token', 'text')
    .addColumn('token_expires_at', 'timestamptz')
    .addColumn('token_issued_at', 'timestamptz')
    .addColumn('enterprise_id', 'text')
    .addColumn('events_rate_limited_at', 'timestamptz')
    .addColumn('events_rate_limited_minutes', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`UPDATE slack_connections SET streaming_refused = NULL, streaming_refused_at = NULL WHERE streaming_refused = 'token_expired'`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const column of [
    'events_rate_limited_minutes',
    'events_rate_limited_at',
    'enterprise_id',
    'token_issued_at',
    'token_expires_at',
    'refresh_token',
  ]) {
    await db.schema.alterTable('slack_connections').dropColumn(column).execute();
  }
}
