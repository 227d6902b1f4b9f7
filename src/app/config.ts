/**
 * The one place that reads the environment. Everything else receives a typed `Config`.
 *
 * The schema is keyed by the environment variable names themselves, so that the set of
 * variables the service understands is `Object.keys(envSchema.shape)` (the operations
 * tests compare docker-compose against it).
 */
import path from 'node:path';
import { z } from 'zod';
import { parseDuration } from './duration';
import { DEFAULT_TASK_QUEUE } from './temporal/contract';
import { type RunSettings } from '../runs/contract';

const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

const int = (fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max).default(fallback);

const port = (fallback: number) => int(fallback, 0, 65535);

const duration = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      const ms = parseDuration(value);
      if (ms === undefined) {
        ctx.addIssue({ code: 'custom', message: `"${value}" is not a duration (use 60000, 60s, 5m or 1h)` });
        return z.NEVER;
      }
      return ms;
    });

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

const preregisteredClients = z
  .string()
  .default('{}')
  .transform((value, ctx) => {
    try {
      const parsed = z.record(z.string().url(), z.object({ clientId: z.string().min(1) })).safeParse(JSON.parse(value));
      if (parsed.success) return parsed.data;
      ctx.addIssue({ code: 'custom', message: 'must map server URLs to {"clientId": "..."}' });
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be JSON' });
    }
    return z.NEVER;
  });

const originList = z
  .string()
  .default('')
  .transform((value, ctx) => {
    const origins: string[] = [];
    for (const raw of value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      try {
        const url = new URL(raw);
        origins.push(url.origin);
      } catch {
        ctx.addIssue({ code: 'custom', message: `"${raw}" is not an origin such as http://127.0.0.1:39123` });
      }
    }
    return origins;
  });

export const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

  // Where embedded state lives, and whether serve/worker may start embedded servers.
  DATA_DIR: z.string().default('.data'),
  EMBEDDED: bool(false),

  // Front door.
  HOST: z.string().default('127.0.0.1'),
  PORT: port(8080),
  APP_BASE_URL: optionalString,
  SHUTDOWN_GRACE: duration('10s'),
  // How long /ready answers 503 before the listener closes, so load balancers stop routing first.
  SHUTDOWN_READY_DELAY: duration('0s'),

  // Temporal. Unset TEMPORAL_ADDRESS means: start the embedded dev server.
  TEMPORAL_ADDRESS: optionalString,
  TEMPORAL_NAMESPACE: z.string().default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default(DEFAULT_TASK_QUEUE),
  TEMPORAL_CLI: optionalString,
  TEMPORAL_DEV_PORT: port(7233),
  TEMPORAL_UI_PORT: port(8233),
  TEMPORAL_DEV_HEADLESS: bool(false),
  TEMPORAL_DEV_SQLITE_SYNCHRONOUS: z.enum(['full', 'normal']).default('full'),
  TEMPORAL_START_TIMEOUT: duration('2s'),
  TEMPORAL_UPDATE_TIMEOUT: duration('5s'),
  WORKFLOW_BUNDLE_PATH: optionalString,
  WORKER_METRICS_PORT: port(0),
  // The SDK's defaults (40, 10, 10); see docs/performance.md for what was measured.
  WORKER_WORKFLOW_TASK_SLOTS: int(40, 2, 10_000),
  WORKER_WORKFLOW_TASK_POLLERS: int(10, 1, 1000),
  WORKER_ACTIVITY_TASK_POLLERS: int(10, 1, 1000),

  // Postgres. Unset DATABASE_URL means: start the embedded Postgres.
  DATABASE_URL: optionalString,
  EMBEDDED_PG_PORT: port(54329),
  DATABASE_POOL_MAX: int(10, 1, 1000),

  // Secrets. SECRET_KEY is 32 bytes, base64 or hex; embedded mode generates one under DATA_DIR.
  SECRET_KEY: optionalString,
  // The key before a rotation: still opens stored secrets and verifies link tokens, never seals.
  SECRET_KEY_PREVIOUS: optionalString,

  // Automation runs.
  RUN_LEASE_TIMEOUT: duration('60s'),
  RUN_MAX_ATTEMPTS: int(2, 1, 100),
  RUN_RETRY_WINDOW: duration('5m'),
  RUN_MAX_DURATION: duration('60m'),
  RUN_CLAIM_DEADLINE: duration('10m'),
  RUN_CONTINUE_AS_NEW_EVENTS: int(2000, 10),
  RUN_EVENT_BUFFER_MAX: int(1000, 1),
  // Applied events a run may hold unpersisted (Postgres refusing its writes) before the API
  // answers 503 for it, so senders retry instead of piling acked work into its history.
  RUN_UNPERSISTED_MAX_EVENTS: int(1000, 1),
  // Each API process forwards one heartbeat per (run, attempt) per this fraction of the run's
  // lease. Above 0.75 a single lost forward could cost the lease.
  RUN_HEARTBEAT_COALESCE_FRACTION: z.coerce.number().gt(0).max(0.75).default(0.25),

  // Slack.
  SLACK_API_BASE_URL: z.string().url().default('https://slack.com/api'),
  SLACK_WORKSPACE_QUOTA_PER_MINUTE: int(600, 1),
  SLACK_USER_QUOTA_PER_MINUTE: int(10, 1),
  SLACK_MEMBER_DAILY_INVOCATIONS: int(100, 1),
  SLACK_MEMBER_CONCURRENT_RUNS: int(3, 1),
  SLACK_LINK_WAIT: duration('15m'),
  SLACK_LINK_TOKEN_TTL: duration('10m'),

  // GitHub.
  GITHUB_WEBHOOK_SECRET: optionalString,
  GITHUB_WEBHOOK_SECRET_PREVIOUS: optionalString,

  // MCP resolve.
  MCP_PREREGISTERED_OAUTH_CLIENTS: preregisteredClients,
  MCP_ALLOW_PRIVATE_NETWORK: bool(false),
  MCP_PRIVATE_ALLOWLIST: originList,
  MCP_PROBE_TIMEOUT: duration('8s'),
  // `off`: probes resolve no host names (only IP literals and localhost), for sandboxes and
  // benchmarks that must not send a packet beyond the machine.
  MCP_DNS: z.enum(['system', 'off']).default('system'),

  // `den runtime` (the reference runtime, a client of this API): where the API is, and the key.
  DEN_API_URL: z.string().url().default('http://127.0.0.1:8080'),
  DEN_API_KEY: optionalString,

  // `npm run cluster` (docs/operations.md, "Production topology"): a Temporal server with
  // Postgres persistence, API replicas on PORT, PORT+1, … and worker processes, on this machine.
  CLUSTER_HISTORY_SHARDS: int(8, 1, 16384),
  // Membership ports sit 300 below the gRPC ports and Temporal stores them as smallint.
  CLUSTER_TEMPORAL_PORT: int(7233, 1324, 32767),
  CLUSTER_API_REPLICAS: int(2, 1, 32),
  CLUSTER_WORKERS: int(2, 1, 32),
  CLUSTER_PG_PORT: port(54339),
  CLUSTER_UI_PORT: port(8234),
  TEMPORAL_SERVER_BIN: optionalString,
  TEMPORAL_SQL_TOOL: optionalString,
  TEMPORAL_UI_SERVER_BIN: optionalString,

  // Benchmarks only: verify and ack without the durable enqueue, to measure its cost.
  BENCH_DISABLE_ENQUEUE: bool(false),
});

export type Env = z.input<typeof envSchema>;

/**
 * The one definition: the environment schema above, checked as a whole and shaped into the
 * nested configuration every module receives. `Config` is inferred from it; nothing restates it.
 */
export const configSchema = envSchema
  .superRefine((e, ctx) => {
    // A benchmark switch that makes every ack non-durable must never reach production.
    if (e.NODE_ENV === 'production' && e.BENCH_DISABLE_ENQUEUE) {
      ctx.addIssue({
        code: 'custom',
        path: ['BENCH_DISABLE_ENQUEUE'],
        message: 'must not be true when NODE_ENV=production (acks would not be durable)',
      });
    }
    // Connect links would point at HOST:PORT, an address members cannot open.
    if (e.NODE_ENV === 'production' && !e.APP_BASE_URL) {
      ctx.addIssue({
        code: 'custom',
        path: ['APP_BASE_URL'],
        message: 'is required when NODE_ENV=production (the public URL of the connect page Slack links point to)',
      });
    }
  })
  .transform((e) => ({
    env: e.NODE_ENV,
    logLevel: e.LOG_LEVEL,
    dataDir: path.resolve(e.DATA_DIR),
    embeddedAllowed: e.EMBEDDED,
    http: {
      host: e.HOST,
      port: e.PORT,
      publicBaseUrl: e.APP_BASE_URL,
      shutdownGraceMs: e.SHUTDOWN_GRACE,
      shutdownReadyDelayMs: e.SHUTDOWN_READY_DELAY,
    },
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      cliPath: e.TEMPORAL_CLI,
      devPort: e.TEMPORAL_DEV_PORT,
      uiPort: e.TEMPORAL_UI_PORT,
      devHeadless: e.TEMPORAL_DEV_HEADLESS,
      devSqliteSynchronous: e.TEMPORAL_DEV_SQLITE_SYNCHRONOUS,
      startTimeoutMs: e.TEMPORAL_START_TIMEOUT,
      updateTimeoutMs: e.TEMPORAL_UPDATE_TIMEOUT,
      workflowBundlePath: e.WORKFLOW_BUNDLE_PATH,
      workerMetricsPort: e.WORKER_METRICS_PORT,
      worker: {
        workflowTaskSlots: e.WORKER_WORKFLOW_TASK_SLOTS,
        workflowTaskPollers: e.WORKER_WORKFLOW_TASK_POLLERS,
        activityTaskPollers: e.WORKER_ACTIVITY_TASK_POLLERS,
      },
    },
    database: { url: e.DATABASE_URL, embeddedPort: e.EMBEDDED_PG_PORT, poolMax: e.DATABASE_POOL_MAX },
    secretKey: e.SECRET_KEY,
    secretKeyPrevious: e.SECRET_KEY_PREVIOUS,
    /** Defaults for new runs; each run carries its own copy (see RunSettings). */
    runs: {
      leaseTimeoutMs: e.RUN_LEASE_TIMEOUT,
      maxAttempts: e.RUN_MAX_ATTEMPTS,
      retryWindowMs: e.RUN_RETRY_WINDOW,
      maxDurationMs: e.RUN_MAX_DURATION,
      claimDeadlineMs: e.RUN_CLAIM_DEADLINE,
      continueAsNewEvents: e.RUN_CONTINUE_AS_NEW_EVENTS,
      eventBufferMax: e.RUN_EVENT_BUFFER_MAX,
    } satisfies RunSettings,
    slack: {
      apiBaseUrl: e.SLACK_API_BASE_URL.replace(/\/+$/, ''),
      workspaceQuotaPerMinute: e.SLACK_WORKSPACE_QUOTA_PER_MINUTE,
      userQuotaPerMinute: e.SLACK_USER_QUOTA_PER_MINUTE,
      memberDailyInvocations: e.SLACK_MEMBER_DAILY_INVOCATIONS,
      memberConcurrentRuns: e.SLACK_MEMBER_CONCURRENT_RUNS,
      linkWaitMs: e.SLACK_LINK_WAIT,
      linkTokenTtlMs: e.SLACK_LINK_TOKEN_TTL,
    },
    github: { webhookSecret: e.GITHUB_WEBHOOK_SECRET, webhookSecretPrevious: e.GITHUB_WEBHOOK_SECRET_PREVIOUS },
    mcp: {
      preregisteredClients: e.MCP_PREREGISTERED_OAUTH_CLIENTS,
      allowPrivateNetwork: e.MCP_ALLOW_PRIVATE_NETWORK,
      privateAllowlist: e.MCP_PRIVATE_ALLOWLIST,
      probeTimeoutMs: e.MCP_PROBE_TIMEOUT,
      dns: e.MCP_DNS,
    },
    cluster: {
      historyShards: e.CLUSTER_HISTORY_SHARDS,
      temporalPort: e.CLUSTER_TEMPORAL_PORT,
      apiReplicas: e.CLUSTER_API_REPLICAS,
      workers: e.CLUSTER_WORKERS,
      postgresPort: e.CLUSTER_PG_PORT,
      uiPort: e.CLUSTER_UI_PORT,
      serverBin: e.TEMPORAL_SERVER_BIN,
      sqlToolBin: e.TEMPORAL_SQL_TOOL,
      uiServerBin: e.TEMPORAL_UI_SERVER_BIN,
    },
    bench: { disableEnqueue: e.BENCH_DISABLE_ENQUEUE },
    runtimeClient: { apiUrl: e.DEN_API_URL, apiKey: e.DEN_API_KEY },
    runAdmission: { unpersistedMaxEvents: e.RUN_UNPERSISTED_MAX_EVENTS, heartbeatCoalesceFraction: e.RUN_HEARTBEAT_COALESCE_FRACTION },
  }));

export type Config = z.output<typeof configSchema>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses an environment (process.env by default). Every problem is reported at once. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const known: Record<string, string | undefined> = {};
  for (const key of Object.keys(envSchema.shape)) known[key] = env[key] === '' ? undefined : env[key];
  const result = configSchema.safeParse(known);
  if (!result.success) {
    throw new ConfigError(result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`));
  }
  return result.data;
}

/** The URL the service is reachable at, for links it hands out (Slack connect links). */
export function publicBaseUrl(config: Config): string {
  return (config.http.publicBaseUrl ?? `http://${config.http.host}:${config.http.port}`).replace(/\/+$/, '');
}

/** The process environment with some variables replaced (tests, the bench and chaos scripts). */
export function loadConfigWith(overrides: Record<string, string | undefined>): Config {
  return loadConfig({ ...process.env, ...overrides });
}

/** The environment for a child process this one starts: this process's, with some variables replaced. */
export function childEnvironment(overrides: Record<string, string | undefined>): NodeJS.ProcessEnv {
  return { ...process.env, ...overrides };
}
