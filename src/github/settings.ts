/**
 * The GitHub feature's settings: the webhook secret (and the one before a rotation), the App's
 * credentials for the sync, the App's slug and OAuth client for its install flow, what a sync
 * picks and how hard it tries, and the reconcile's period and pace.
 */
import fs from 'node:fs';
import { defineSettings, duration, int, optionalString } from '../app/settings';
import { z } from 'zod';
import { githubWebBaseUrl } from './oauth';

const INSTALL_VARIABLES = ['GITHUB_APP_SLUG', 'GITHUB_CLIENT_ID', 'GITHUB_CLIENT_SECRET'] as const;

/** An App's slug as GitHub makes it from the App's name: lower-case letters, digits and hyphens. */
const appSlug = optionalString.pipe(
  z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]{0,99}$/, 'must be the App slug of its github.com/apps/<slug> page')
    .optional(),
);

/** The capability manifests a sync keeps when GITHUB_SYNC_PATHS is unset. */
export const DEFAULT_SYNC_PATHS = ['.claude-plugin/marketplace.json', '**/.claude-plugin/plugin.json', '**/SKILL.md', '.mcp.json'];

const globList = z
  .string()
  .optional()
  .transform((v) =>
    v === undefined
      ? DEFAULT_SYNC_PATHS
      : v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
  );

/** The key itself, or the file's text; a file that cannot be read is a configuration problem. */
function readKeyFile(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

export const githubSettings = defineSettings(
  {
    GITHUB_WEBHOOK_SECRET: optionalString,
    GITHUB_WEBHOOK_SECRET_PREVIOUS: optionalString,
    GITHUB_APP_ID: optionalString,
    GITHUB_APP_PRIVATE_KEY: optionalString,
    GITHUB_APP_PRIVATE_KEY_FILE: optionalString,
    GITHUB_API_BASE_URL: z.string().url().default('https://api.github.com'),
    GITHUB_APP_SLUG: appSlug,
    GITHUB_CLIENT_ID: optionalString,
    GITHUB_CLIENT_SECRET: optionalString,
    GITHUB_SYNC_PATHS: globList,
    GITHUB_SYNC_MAX_ATTEMPTS: int(5, 1, 50),
    GITHUB_SYNC_RETRY_DELAY: duration('2s'),
    GITHUB_SYNC_MAX_FILE_BYTES: int(1024 * 1024, 1, 100 * 1024 * 1024),
    GITHUB_SYNC_MAX_FILES: int(1000, 1, 100_000),
    GITHUB_SYNC_MAX_TREE_REQUESTS: int(100, 1, 2000),
    GITHUB_RATE_LIMIT_RECHECK: duration('5m'),
    GITHUB_TARGET_IDLE: duration('10m'),
    GITHUB_RECONCILE_INTERVAL: duration('10m'),
    GITHUB_RECONCILE_MAX_PAGES: int(50, 1, 1000),
    GITHUB_RECONCILE_MAX_REDELIVERIES: int(5, 1, 100),
    GITHUB_RECONCILE_REDELIVERIES_PER_RUN: int(100, 1, 1000),
    // GitHub's secondary limit is 900 points a minute: never more, and a POST (5 points) must fit.
    GITHUB_RECONCILE_POINTS_PER_MINUTE: int(600, 10, 900),
  },
  (e) => {
    const privateKey = (e.GITHUB_APP_PRIVATE_KEY ?? readKeyFile(e.GITHUB_APP_PRIVATE_KEY_FILE))?.replace(/\\n/g, '\n');
    const apiBaseUrl = e.GITHUB_API_BASE_URL.replace(/\/+$/, '');
    const { GITHUB_APP_SLUG: slug, GITHUB_CLIENT_ID: clientId, GITHUB_CLIENT_SECRET: clientSecret } = e;
    return {
      webhookSecret: e.GITHUB_WEBHOOK_SECRET,
      webhookSecretPrevious: e.GITHUB_WEBHOOK_SECRET_PREVIOUS,
      /** Both or neither: without them deliveries are still recorded, and nothing syncs. */
      app: e.GITHUB_APP_ID !== undefined && privateKey !== undefined ? { appId: e.GITHUB_APP_ID, privateKey } : undefined,
      apiBaseUrl,
      /** All three or none: without them the install routes answer 409 and `den` still binds installations. */
      install:
        slug !== undefined && clientId !== undefined && clientSecret !== undefined
          ? { slug, clientId, clientSecret, webBaseUrl: githubWebBaseUrl(apiBaseUrl) }
          : undefined,
      sync: {
        paths: e.GITHUB_SYNC_PATHS,
        maxAttempts: e.GITHUB_SYNC_MAX_ATTEMPTS,
        retryDelayMs: e.GITHUB_SYNC_RETRY_DELAY,
        maxFileBytes: e.GITHUB_SYNC_MAX_FILE_BYTES,
        maxFiles: e.GITHUB_SYNC_MAX_FILES,
        maxTreeRequests: e.GITHUB_SYNC_MAX_TREE_REQUESTS,
        rateLimitRecheckMs: e.GITHUB_RATE_LIMIT_RECHECK,
        idleMs: e.GITHUB_TARGET_IDLE,
      },
      reconcileIntervalMs: e.GITHUB_RECONCILE_INTERVAL,
      reconcile: {
        maxPages: e.GITHUB_RECONCILE_MAX_PAGES,
        maxRedeliveries: e.GITHUB_RECONCILE_MAX_REDELIVERIES,
        redeliveriesPerRun: e.GITHUB_RECONCILE_REDELIVERIES_PER_RUN,
        pointsPerMinute: e.GITHUB_RECONCILE_POINTS_PER_MINUTE,
      },
    };
  },
  (e) => {
    const problems: string[] = [];
    if (e.GITHUB_APP_PRIVATE_KEY_FILE !== undefined && readKeyFile(e.GITHUB_APP_PRIVATE_KEY_FILE) === undefined) {
      problems.push('GITHUB_APP_PRIVATE_KEY_FILE: cannot be read');
    }
    const hasKey = e.GITHUB_APP_PRIVATE_KEY !== undefined || e.GITHUB_APP_PRIVATE_KEY_FILE !== undefined;
    if (e.GITHUB_APP_ID !== undefined && !hasKey) problems.push('GITHUB_APP_PRIVATE_KEY: required with GITHUB_APP_ID');
    if (e.GITHUB_APP_ID === undefined && hasKey) problems.push('GITHUB_APP_ID: required with a private key');
    const missing = INSTALL_VARIABLES.filter((name) => e[name] === undefined);
    if (missing.length > 0 && missing.length < INSTALL_VARIABLES.length) {
      problems.push(`${missing.join(', ')}: required with ${INSTALL_VARIABLES.filter((name) => !missing.includes(name)).join(', ')}`);
    }
    return problems;
  },
);

export type GithubSettings = ReturnType<typeof githubSettings.build>;
