/**
 * The Slack feature's settings. A Slack invocation starts a run, so it carries the run defaults
 * too, and it tells a member when no runtime of theirs is there or their breaker paused them, so it
 * reads the runtimes' settings (presence window, breaker) as well.
 */
import { z } from 'zod';
import { defineSettings, duration, int, optionalString } from '../app/settings';
import { runDefaults, runnerSettings } from '../runs';

/** The shortest SLACK_STREAM_MAX_AGE: each streamed reply of a long answer holds at least that much of it. */
const MIN_STREAM_AGE_MS = 10_000;
/** The longest SLACK_EVENT_ACK_WAIT: Slack wants an event's answer within 3 s, and the route does more than wait. */
const MAX_ACK_WAIT_MS = 2_500;

export const slackSettings = defineSettings(
  {
    ...runDefaults.shape,
    ...runnerSettings.shape,
    SLACK_API_BASE_URL: z.string().url().default('https://slack.com/api'),
    SLACK_WORKSPACE_QUOTA_PER_MINUTE: int(600, 1),
    SLACK_USER_QUOTA_PER_MINUTE: int(10, 1),
    SLACK_MEMBER_DAILY_INVOCATIONS: int(100, 1),
    SLACK_MEMBER_CONCURRENT_RUNS: int(3, 1),
    SLACK_LINK_WAIT: duration('15m'),
    SLACK_LINK_TOKEN_TTL: duration('10m'),
    SLACK_PROGRESS_INTERVAL: duration('3s'),
    SLACK_REPLY_MODE: z.enum(['auto', 'stream', 'edit']).default('auto'),
    SLACK_RATE_WINDOW: duration('60s'),
    SLACK_TIER2_PER_WINDOW: int(20, 1),
    SLACK_TIER3_PER_WINDOW: int(50, 1),
    SLACK_TIER4_PER_WINDOW: int(100, 1),
    SLACK_FINAL_DELIVERY_DEADLINE: duration('1h'),
    // How long an event's ack waits for Temporal before the event is kept in Postgres (src/slack/deferred-events.ts).
    SLACK_EVENT_ACK_WAIT: duration('2s'),
    // Inside what Slack allows one streamed message: it closes one about 5 minutes after it
    // starts, and stops one growing at roughly 10.6-12k UTF-8 bytes (src/slack/stream-segments.ts).
    SLACK_STREAM_MAX_AGE: duration('4m'),
    SLACK_STREAM_MAX_BYTES: int(9_000, 1_000, 12_000),
    // chat.postMessage: about one message a second per channel (src/slack/pacing.ts).
    SLACK_CHANNEL_POST_INTERVAL: duration('1s'),
    SLACK_CONTINUE_AS_NEW_EVENTS: int(4_000, 50),
    SLACK_RESPONSE_URL_PREFIX: z.string().url().default('https://hooks.slack.com/'),
    SLACK_OAUTH_AUTHORIZE_URL: z.string().url().default('https://slack.com/oauth/v2/authorize'),
    SLACK_APP_NAME: z.string().trim().min(1).max(35).default('den'),
    // Whether a thread reply without a mention is for the bot: `off`, `asker`, `members` (a connection may set its own).
    SLACK_THREAD_FOLLOW_UPS: z.enum(['off', 'asker', 'members']).default('off'),
    // The bounds of a run's thread context, newest messages kept.
    SLACK_CONTEXT_MAX_MESSAGES: int(50, 0, 1000),
    SLACK_CONTEXT_MAX_CHARS: int(40_000, 0, 1_000_000),
    // The least time between two publications of one member's Home tab (or suggested prompts).
    SLACK_HOME_MIN_INTERVAL: duration('10s'),
    // The dashboard whose page completes connect links; unset, members link with `den slack link <code>` only.
    DASHBOARD_URL: optionalString.pipe(z.string().url().optional()),
  },
  (e) => ({
    apiBaseUrl: e.SLACK_API_BASE_URL.replace(/\/+$/, ''),
    workspaceQuotaPerMinute: e.SLACK_WORKSPACE_QUOTA_PER_MINUTE,
    userQuotaPerMinute: e.SLACK_USER_QUOTA_PER_MINUTE,
    memberDailyInvocations: e.SLACK_MEMBER_DAILY_INVOCATIONS,
    memberConcurrentRuns: e.SLACK_MEMBER_CONCURRENT_RUNS,
    linkWaitMs: e.SLACK_LINK_WAIT,
    linkTokenTtlMs: e.SLACK_LINK_TOKEN_TTL,
    progressIntervalMs: e.SLACK_PROGRESS_INTERVAL,
    replyMode: e.SLACK_REPLY_MODE,
    budget: {
      windowMs: e.SLACK_RATE_WINDOW,
      tiers: { 2: e.SLACK_TIER2_PER_WINDOW, 3: e.SLACK_TIER3_PER_WINDOW, 4: e.SLACK_TIER4_PER_WINDOW },
    },
    finalDeliveryDeadlineMs: e.SLACK_FINAL_DELIVERY_DEADLINE,
    eventAckWaitMs: e.SLACK_EVENT_ACK_WAIT,
    stream: { maxAgeMs: e.SLACK_STREAM_MAX_AGE, maxBytes: e.SLACK_STREAM_MAX_BYTES },
    channelPostIntervalMs: e.SLACK_CHANNEL_POST_INTERVAL,
    continueAsNewEvents: e.SLACK_CONTINUE_AS_NEW_EVENTS,
    responseUrlPrefix: e.SLACK_RESPONSE_URL_PREFIX,
    /** Slack's page that asks an admin to install an app (OAuth v2); tests point it at the fake. */
    authorizeUrl: e.SLACK_OAUTH_AUTHORIZE_URL,
    /** The name a generated app manifest gives a new app and its bot user, unless its draft names one. */
    appName: e.SLACK_APP_NAME,
    dashboardUrl: e.DASHBOARD_URL?.replace(/\/+$/, ''),
    /** What the runs this feature starts are started with. */
    runDefaults: runDefaults.build(e),
    /** Whether a member's runtime is online, and their breaker (the runs feature's settings, read here). */
    runners: runnerSettings.build(e),
    threadFollowUps: e.SLACK_THREAD_FOLLOW_UPS,
    context: { maxMessages: e.SLACK_CONTEXT_MAX_MESSAGES, maxChars: e.SLACK_CONTEXT_MAX_CHARS },
    homeMinIntervalMs: e.SLACK_HOME_MIN_INTERVAL,
  }),
  (e) => [
    // A streamed reply younger than this is not worth the next one's chat.startStream.
    ...(e.SLACK_STREAM_MAX_AGE < MIN_STREAM_AGE_MS ? [`SLACK_STREAM_MAX_AGE: at least ${MIN_STREAM_AGE_MS / 1000}s`] : []),
    ...(e.SLACK_EVENT_ACK_WAIT < 1 || e.SLACK_EVENT_ACK_WAIT > MAX_ACK_WAIT_MS
      ? [`SLACK_EVENT_ACK_WAIT: more than 0 and at most ${MAX_ACK_WAIT_MS / 1000}s`]
      : []),
  ],
);

export type SlackSettings = ReturnType<typeof slackSettings.build>;
