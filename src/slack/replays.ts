/**
 * The replay cache of verified Slack requests: a request's (connection, timestamp, signature) is
 * recorded the first time it verifies, in Postgres so every API replica shares it, and kept until
 * the signature window around its timestamp has closed. A second sighting is a replay, refused
 * like a bad signature. Events do not use it (their `event_id` dedupes them, Slack's retries
 * included); slash commands do, and any other signed Slack route can with `verifiedOnce`
 * (src/slack/verify.ts).
 */
import { sql } from 'kysely';
import { AppError, errors } from '../app/errors';
import type { Db } from '../app/store/db';
import { SLACK_TIMESTAMP_TOLERANCE_SECONDS } from './signature';

/** Rows kept this long past their window, so replicas whose clocks disagree by less agree on what is expired. */
const CLOCK_SKEW_MARGIN_MS = 60_000;

export interface SignedRequest {
  connectionId: string;
  /** The `X-Slack-Request-Timestamp`, in seconds. */
  timestamp: number;
  /** The `X-Slack-Signature`, normalised (`v0=` and lowercase hex). */
  signature: string;
}

/**
 * Records the request; false when it was recorded before (a replay). Postgres failures are a coded
 * 503: without the cache a replay cannot be told apart, so nothing is answered.
 */
export async function firstSighting(db: Db, request: SignedRequest): Promise<boolean> {
  const expiresAt = new Date((request.timestamp + SLACK_TIMESTAMP_TOLERANCE_SECONDS) * 1000 + CLOCK_SKEW_MARGIN_MS);
  try {
    const inserted = await db
      .insertInto('slack_request_replays')
      .values({
        connection_id: request.connectionId,
        request_timestamp: request.timestamp,
        signature: request.signature,
        expires_at: expiresAt,
      })
      .onConflict((oc) => oc.columns(['connection_id', 'request_timestamp', 'signature']).doNothing())
      .returning('connection_id')
      .executeTakeFirst();
    return inserted !== undefined;
  } catch (error) {
    throw error instanceof AppError ? error : errors.unavailable('postgres', error);
  }
}

/**
 * Deletes expired entries, oldest first, in batches of `batch` rows, at most `maxBatches` per call
 * so one sweep never holds the table for long; returns how many went.
 */
export async function sweepSlackReplays(db: Db, now: Date, { batch = 1000, maxBatches = 10 } = {}): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < maxBatches; i++) {
    const result = await sql`
      DELETE FROM slack_request_replays
      WHERE (connection_id, request_timestamp, signature) IN (
        SELECT connection_id, request_timestamp, signature FROM slack_request_replays
        WHERE expires_at < ${now}
        ORDER BY expires_at
        LIMIT ${batch}
        FOR UPDATE SKIP LOCKED
      )`.execute(db);
    const count = Number(result.numAffectedRows ?? 0n);
    deleted += count;
    if (count < batch) break;
  }
  return deleted;
}
