/**
 * The platform's settings: the process, the front door, Temporal, Postgres and the secret key.
 * Each feature declares its own slice beside its code (`src/<feature>/settings.ts`); the
 * composition root (src/main/config.ts) checks every slice at once.
 */
import path from 'node:path';
import { z } from 'zod';
import { trustedProxiesProblem } from './http/client-address';
import { bool, defineSettings, duration, int, optionalString, parseSettings, port, type Environment } from './settings';
import { DEFAULT_TASK_QUEUE } from './temporal/contract';

export const platformSettings = defineSettings(
  {
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
    // Idle keep-alive connections stay open this long: longer than any load balancer in front
    // keeps an idle upstream connection, so the balancer never reuses one the API just closed.
    HTTP_KEEP_ALIVE_TIMEOUT: duration('65s'),
    // A request's headers must arrive within this, counted from its first byte (idle keep-alive
    // time does not count), and the whole request within HTTP_REQUEST_TIMEOUT.
    HTTP_HEADERS_TIMEOUT: duration('10s'),
    HTTP_REQUEST_TIMEOUT: duration('60s'),
    // Open connections one API process accepts; past it the next one is closed at once.
    HTTP_MAX_CONNECTIONS: int(10_000, 1, 1_000_000),
    // The load balancers whose X-Forwarded-For names the client: addresses or CIDRs, comma-separated.
    TRUSTED_PROXIES: z
      .string()
      .optional()
      .transform((v) =>
        (v ?? '')
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      ),

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
    // Every start carries its organization as fairness key; the dev server turns Fairness on.
    TEMPORAL_FAIRNESS: bool(true),
    // How long an organization's fairness weight, read from Postgres, is used before a re-read.
    TEMPORAL_FAIRNESS_WEIGHT_TTL: duration('30s'),
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

    // Entries each in-memory authentication cache holds (unknown credentials and ids, verified
    // credentials, Slack signing secrets), and how long an unknown one is refused without a lookup.
    AUTH_CACHE_KEYS: int(10_000, 100, 10_000_000),
    AUTH_UNKNOWN_CACHE_TTL: duration('10s'),
    // Bytes of signed-webhook bodies the process holds before their signature is checked; past
    // it they are answered 503 with Retry-After, never held. Bodies over 1 MiB share 3/4 of it,
    // one client address may hold at most UNAUTHENTICATED_BODY_PER_ADDRESS of it, and a body that
    // arrives slower than UNAUTHENTICATED_BODY_MIN_RATE is cut off once its grace has passed.
    UNAUTHENTICATED_BODY_BUDGET: int(128 * 1024 * 1024, 1024 * 1024, 64 * 1024 * 1024 * 1024),
    UNAUTHENTICATED_BODY_PER_ADDRESS: int(32 * 1024 * 1024, 1024 * 1024, 64 * 1024 * 1024 * 1024),
    UNAUTHENTICATED_BODY_MIN_RATE: int(64 * 1024, 1, 1024 * 1024 * 1024),
    UNAUTHENTICATED_BODY_GRACE: duration('5s'),

    // Admission per organization at the front door: in-flight engine calls per API process,
    // and accepted requests per window across every replica (counted in Postgres).
    ADMISSION: bool(true),
    ADMISSION_ORG_IN_FLIGHT: int(8, 1, 100_000),
    // Only a ceiling: what binds under load is the measured delay (ADMISSION_DELAY_TARGET).
    ADMISSION_ORG_RATE: int(500, 1, 1_000_000),
    ADMISSION_RATE_WINDOW: duration('1s'),
    ADMISSION_RATE_BATCH: int(5, 1, 1000),
    ADMISSION_WAIT_MAX: duration('8s'),
    ADMISSION_QUEUE_WAIT: duration('1s'),
    // A sender that comes back before its Retry-After waits this long (at most that Retry-After)
    // before its next refusal, so it cannot spin the API on refusals; 0 answers at once.
    ADMISSION_REFUSAL_HOLD: duration('1s'),
    // Past this engine delay (the workers' measured backlog age and report lag), and rising, the
    // engine is saturated: new work is limited to its measured throughput and shared between
    // organizations (docs/capacity.md says where 2 s comes from); ENGINE_DELAY_INTERVAL is how
    // often workers publish the delay and API processes read it.
    ADMISSION_DELAY_TARGET: duration('2s'),
    ENGINE_DELAY_INTERVAL: duration('1s'),

    // Benchmarks only: verify and ack without the durable enqueue, to measure its cost.
    BENCH_DISABLE_ENQUEUE: bool(false),
  },
  (e) => ({
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
      keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT,
      headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT,
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT,
      maxConnections: e.HTTP_MAX_CONNECTIONS,
      trustedProxies: e.TRUSTED_PROXIES,
      unauthenticatedBodies: {
        budgetBytes: e.UNAUTHENTICATED_BODY_BUDGET,
        perAddressBytes: e.UNAUTHENTICATED_BODY_PER_ADDRESS,
        minBytesPerSecond: e.UNAUTHENTICATED_BODY_MIN_RATE,
        graceMs: e.UNAUTHENTICATED_BODY_GRACE,
      },
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
      fairness: e.TEMPORAL_FAIRNESS,
      fairnessWeightTtlMs: e.TEMPORAL_FAIRNESS_WEIGHT_TTL,
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
    authCaches: { maxKeys: e.AUTH_CACHE_KEYS, unknownTtlMs: e.AUTH_UNKNOWN_CACHE_TTL },
    admission: {
      enabled: e.ADMISSION,
      inFlight: e.ADMISSION_ORG_IN_FLIGHT,
      ratePerSecond: e.ADMISSION_ORG_RATE,
      windowMs: e.ADMISSION_RATE_WINDOW,
      batch: e.ADMISSION_RATE_BATCH,
      waitMaxMs: e.ADMISSION_WAIT_MAX,
      queueWaitMs: e.ADMISSION_QUEUE_WAIT,
      refusalHoldMs: e.ADMISSION_REFUSAL_HOLD,
      delayTargetMs: e.ADMISSION_DELAY_TARGET,
    },
    engineDelay: { intervalMs: e.ENGINE_DELAY_INTERVAL },
    bench: { disableEnqueue: e.BENCH_DISABLE_ENQUEUE },
  }),
  (e) => [
    // A benchmark switch that makes every ack non-durable must never reach production.
    ...(e.NODE_ENV === 'production' && e.BENCH_DISABLE_ENQUEUE
      ? ['BENCH_DISABLE_ENQUEUE: must not be true when NODE_ENV=production (acks would not be durable)']
      : []),
    ...(e.HTTP_REQUEST_TIMEOUT < e.HTTP_HEADERS_TIMEOUT
      ? ['HTTP_REQUEST_TIMEOUT: must not be shorter than HTTP_HEADERS_TIMEOUT (a request includes its headers)']
      : []),
    ...(e.ENGINE_DELAY_INTERVAL < 100
      ? ['ENGINE_DELAY_INTERVAL: must be at least 100ms (each worker describes its task queues that often)']
      : []),
    ...(e.UNAUTHENTICATED_BODY_PER_ADDRESS > e.UNAUTHENTICATED_BODY_BUDGET
      ? ['UNAUTHENTICATED_BODY_PER_ADDRESS: must not be larger than UNAUTHENTICATED_BODY_BUDGET']
      : []),
    ...(trustedProxiesProblem(e.TRUSTED_PROXIES) ? [`TRUSTED_PROXIES: ${trustedProxiesProblem(e.TRUSTED_PROXIES)}`] : []),
    // Connect links would point at HOST:PORT, an address members cannot open.
    ...(e.NODE_ENV === 'production' && !e.APP_BASE_URL
      ? ['APP_BASE_URL: is required when NODE_ENV=production (the public URL of the connect page Slack links point to)']
      : []),
  ],
);

export type PlatformConfig = ReturnType<typeof platformSettings.build>;

/** The platform's settings alone, for processes that run no feature (the CLI); every problem at once. */
export function loadPlatformConfig(environment: Environment = process.env): PlatformConfig {
  return parseSettings(platformSettings, environment);
}

/** The URL the service is reachable at, for links it hands out (Slack connect links). */
export function publicBaseUrl(config: PlatformConfig): string {
  return (config.http.publicBaseUrl ?? `http://${config.http.host}:${config.http.port}`).replace(/\/+$/, '');
}

/** The environment for a child process this one starts: this process's, with some variables replaced. */
export function childEnvironment(overrides: Record<string, string | undefined>): NodeJS.ProcessEnv {
  return { ...process.env, ...overrides };
}
