/**
 * The slack feature's tables as Kysely sees them; the DDL is in src/app/store/migrations/0003_slack.ts,
 * 0006_slack_quotas.ts, 0007_replays.ts, 0012_slack_delivery.ts, 0014_slack_onboarding.ts, 0018_slack_conversation.ts,
 * 0019_slack_token_rotation.ts and 0020_slack_deferred_events.ts.
 */
import type { ColumnType, Generated } from 'kysely';
import type { Timestamp, NullableTimestamp, Int8 } from '../app/store/columns';

export interface SlackTables {
  /** One Slack app installation in one workspace, owned by an organization. */
  slack_connections: {
    /** typeid, prefix `emc` (CONNECTION_ID_PATTERN in connections.ts). */
    id: string;
    organization_id: string;
    /** Null while a draft: Slack's OAuth install (or the operator) names the workspace and the app. */
    team_id: string | null;
    api_app_id: string | null;
    /** AES-256-GCM sealed (src/app/secrets.ts); never stored in the clear. Null until a draft's credentials are set. */
    signing_secret: string | null;
    /** The secret before the last rotation, sealed, accepted until `previous_secret_expires_at`. */
    previous_signing_secret: string | null;
    previous_secret_expires_at: NullableTimestamp;
    /** Sealed `xoxb-` token; without one the service never calls Slack for this connection. */
    bot_token: string | null;
    /** With token rotation on, the sealed refresh token that trades the bot token for a new pair (src/slack/tokens.ts); null without rotation. */
    refresh_token: string | null;
    /** When a rotating bot token expires, and when it was issued; null without rotation. */
    token_expires_at: NullableTimestamp;
    token_issued_at: NullableTimestamp;
    /** An Enterprise Grid org-wide install's organization: events whose authorizations name it are this connection's. */
    enterprise_id: string | null;
    /** The last minute Slack said it dropped this app's events (`app_rate_limited`), and how many such minutes it has reported. */
    events_rate_limited_at: NullableTimestamp;
    events_rate_limited_minutes: ColumnType<number, number | undefined, number>;
    bot_user_id: string | null;
    /** Channel allowlist; null or empty = every channel. DMs are always allowed. */
    channels: string[] | null;
    enabled: boolean;
    /** Why it was disabled (`app_uninstalled`, `tokens_revoked`, `operator`). */
    disabled_reason: string | null;
    /** The error Slack refused chat.startStream with, once it did: the thread keeps to edits since. */
    streaming_refused: string | null;
    streaming_refused_at: NullableTimestamp;
    /** The app's name in its generated manifest (drafts made through the API). */
    name: string | null;
    /** The app's OAuth client id (not a secret: it is in every install link). */
    client_id: string | null;
    /** The app's OAuth client secret, sealed like the signing secret. */
    client_secret: string | null;
    /** The workspace's name as Slack's OAuth install gave it. */
    team_name: string | null;
    /** The last OAuth install through this service, and the admin who started it. */
    installed_at: NullableTimestamp;
    installed_by: string | null;
    /** Slack said the app was uninstalled (`app_uninstalled`): the token is gone, and so are the member links. */
    uninstalled_at: NullableTimestamp;
    /** `off`, `asker` or `members` (src/slack/conversation.ts); null: SLACK_THREAD_FOLLOW_UPS. */
    thread_follow_ups: string | null;
    /** Up to four `{title, message}` for the app's thread (src/slack/assistant.ts); null: the defaults. */
    suggested_prompts: ColumnType<unknown, string | null | undefined, string | null>;
    /** The bot scopes the app is known to have: Slack's grant at the last install, else its manifest's; null: unknown. */
    app_scopes: string[] | null;
    /** The bot events the app is known to subscribe to: the manifest applied at the last install; null: unknown. */
    app_events: string[] | null;
    /** The error Slack refused an assistant method with, once it did: the thread keeps to messages since. */
    assistant_refused: string | null;
    assistant_refused_at: NullableTimestamp;
    created_at: Timestamp;
    updated_at: Timestamp;
  };
  /**
   * Short codes a member types to link their Slack account (`den slack link <code>`): each stands
   * for a link token's claims, its nonce shared with the token of the same reply, so either works once.
   */
  slack_link_codes: {
    /** HMAC of the normalized code under the service secret (src/slack/link-codes.ts): the code itself is never stored. */
    code_hash: string;
    connection_id: string;
    team_id: string;
    slack_user_id: string;
    nonce: string;
    expires_at: Timestamp;
    created_at: Timestamp;
  };
  /** A Slack user of a connection, proven (by a one-time link token) to be this member. */
  slack_account_links: {
    connection_id: string;
    slack_user_id: string;
    organization_id: string;
    member_id: string;
    created_at: Timestamp;
  };
  /** Nonces of redeemed link tokens: a token works once. */
  slack_used_link_tokens: {
    nonce: string;
    connection_id: string;
    slack_user_id: string;
    member_id: string;
    used_at: Timestamp;
    /** After this the token is expired anyway, so the row may be pruned. */
    expires_at: Timestamp;
  };
  /** Invocations held for a link (status awaiting_link): the link route signals their workflows. */
  slack_pending_invocations: {
    connection_id: string;
    event_id: string;
    slack_user_id: string;
    workflow_id: string;
    created_at: Timestamp;
    expires_at: Timestamp;
  };
  /** Runs created from Slack, per member: the rolling-day and concurrency limits count these. */
  slack_member_invocations: {
    connection_id: string;
    event_id: string;
    organization_id: string;
    member_id: string;
    run_id: string;
    started_at: Timestamp;
    ended_at: NullableTimestamp;
    /** The thread it answers in (null before 0018): a follow-up waits for earlier ones of its thread. */
    channel: string | null;
    thread_ts: string | null;
    /** Its invocation's workflow, told when the request ahead of it in the thread ends. */
    workflow_id: string | null;
  };
  /** A thread this connection answered in: where follow-ups may come, and who opened the conversation. */
  slack_threads: {
    connection_id: string;
    channel: string;
    /** The thread's first message (a mention outside a thread is the first message of its own). */
    thread_ts: string;
    organization_id: string;
    asker_slack_user_id: string;
    asker_member_id: string;
    /** Slack's permalink to the thread's first message, once asked for (chat.getPermalink). */
    permalink: string | null;
    created_at: Generated<Date>;
    updated_at: Generated<Date>;
  };
  /** The messages of an answered thread the service holds: asks, its own answers, and others' messages it received. */
  slack_thread_messages: {
    connection_id: string;
    channel: string;
    thread_ts: string;
    ts: string;
    slack_user_id: string | null;
    bot: boolean;
    text: string;
    created_at: Generated<Date>;
  };
  /** Who in a thread was already asked to link their account: once per thread, not once per message. */
  slack_thread_prompts: {
    connection_id: string;
    channel: string;
    thread_ts: string;
    slack_user_id: string;
    created_at: Generated<Date>;
  };
  /** When a member last asked for a surface (`home`, `prompts`): published at most once per SLACK_HOME_MIN_INTERVAL. */
  slack_surface_requests: {
    connection_id: string;
    slack_user_id: string;
    surface: string;
    requested_at: Date;
  };
  /**
   * Invocations counted per quota key (`workspace:T…`, `user:T…:U…`) and fixed window
   * (src/slack/quota.ts). Windows older than the previous one are swept.
   */
  slack_quota_windows: {
    key: string;
    window_start: Date;
    used: number;
  };
  /**
   * Verified Slack requests by (connection, timestamp, signature), kept until their signature
   * window closes so a replay is refused (src/slack/replays.ts); expired rows are swept.
   */
  slack_request_replays: {
    connection_id: string;
    request_timestamp: Int8;
    signature: string;
    expires_at: Timestamp;
  };
  /** Slack events acked before Temporal took their workflow, until it does (src/slack/deferred-events.ts). */
  slack_deferred_events: {
    workflow_id: string;
    connection_id: string;
    organization_id: string;
    /** The workflow's input (SlackEventInput), as the events route built it. */
    input: ColumnType<unknown, string, string>;
    received_at: Timestamp;
    next_attempt_at: Timestamp;
    attempts: ColumnType<number, number | undefined, number>;
    created_at: ColumnType<Date, Date | undefined, Date>;
  };
  /** A token bucket per connection and Web API method, taken by every worker (src/slack/budget.ts). */
  slack_api_budgets: {
    connection_id: string;
    method: string;
    tokens: number;
    refreshed_at: Date;
  };
}

declare module '../app/store/schema' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface Database extends SlackTables {}
}
