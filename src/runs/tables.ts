/** The runs feature's tables as Kysely sees them; the DDL is in src/app/store/migrations/0002_runs.ts. */
import type { ColumnType } from 'kysely';
import type { Timestamp, NullableTimestamp, Int8 } from '../app/store/columns';

/**
 * `automation_runs` is a projection of each run workflow, kept current by the workflow itself
 * (activities/runs.ts) at every status transition and with every batch of persisted events. It
 * backs the list route and the "closed" check of the report routes. Why a table rather than
 * Temporal visibility: visibility is eventually consistent and the dev server's SQLite
 * visibility is slow under load, while a runtime polling `?status=queued` must see a run the
 * moment it exists; the row also outlives the namespace retention, so a closed run stays
 * closed after Temporal has forgotten it.
 *
 * `automation_run_events` is the run's event log, in apply order. The primary key is the
 * dedupe key; the activity inserts with ON CONFLICT DO NOTHING, so activity retries are harmless.
 */
export interface RunTables {
  automation_runs: {
    organization_id: string;
    run_id: string;
    status: string;
    attempt: number;
    member_id: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
    ended_at: NullableTimestamp;
    /** Monotonic per run: a write with an older version (a zombie activity attempt) is ignored. */
    version: Int8;
    /** The RunSummary (contract.ts) as of `version`. `json`, not `jsonb`: it keeps any string, `\u0000` included. */
    summary: ColumnType<unknown, string, string>;
    /** A claim-next poller's short hold on this candidate (migration 0005); never read by reports. */
    claim_pending_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
  };
  automation_run_events: {
    organization_id: string;
    run_id: string;
    attempt: Int8;
    sequence: Int8;
    type: string;
    payload: ColumnType<unknown, string, string>;
    /** The client's createdAt (ms). */
    created_at_ms: Int8;
    /** When the front door received the report (ms). */
    received_at_ms: Int8;
    persisted_at: Timestamp;
  };
  /**
   * When each runtime was last seen claiming or heartbeating (src/runs/presence.ts; DDL in
   * src/app/store/migrations/0016_runners.ts), and the runs it was last seen working on, as
   * `attempt:runId`, newest last.
   */
  runner_presence: {
    organization_id: string;
    runner_id: string;
    member_id: string;
    credential: 'runner_token' | 'api_key';
    label: string | null;
    version: string | null;
    first_seen_at: Timestamp;
    last_seen_at: Timestamp;
    runs: ColumnType<string[], string[] | undefined, string[]>;
  };
  /** Each member's breaker (src/runs/breaker.ts): `state` is its BreakerState; `paused_until` repeats its pause. */
  runner_breakers: {
    organization_id: string;
    member_id: string;
    state: ColumnType<unknown, string, string>;
    paused_until: NullableTimestamp;
    updated_at: Timestamp;
  };
}

declare module '../app/store/schema' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface Database extends RunTables {}
}
