/**
 * How a failed GitHub API call is handled, as a pure function: 429, 5xx and network errors are
 * retried with exponential backoff and full jitter, waiting at least what `Retry-After` or
 * `x-ratelimit-reset` asks; 401, 403, 404, 422 and anything else are final at once.
 */

/** What a failure looks like from the REST client: its HTTP status (none for a network error) and headers. */
export interface GithubFailure {
  status?: number;
  headers?: Record<string, string | number | undefined>;
  message: string;
}

export interface ClassifiedFailure {
  retryable: boolean;
  /** Short and stable: `github_404`, `rate_limited`, `network`… */
  code: string;
  message: string;
  /** How long to wait before the next attempt (retryable only). */
  delayMs: number;
}

const MAX_DELAY_MS = 5 * 60_000;

function header(failure: GithubFailure, name: string): string | undefined {
  const value = failure.headers?.[name];
  return value === undefined ? undefined : String(value);
}

/** The wait GitHub asked for, if any: `Retry-After` seconds, or the rate limit's reset time when none remain. */
function requestedDelayMs(failure: GithubFailure, nowMs: number): number | undefined {
  const retryAfter = Number(header(failure, 'retry-after'));
  if (Number.isFinite(retryAfter) && retryAfter >= 0 && header(failure, 'retry-after') !== undefined) return retryAfter * 1000;
  const reset = Number(header(failure, 'x-ratelimit-reset'));
  if (header(failure, 'x-ratelimit-remaining') === '0' && Number.isFinite(reset)) return Math.max(0, reset * 1000 - nowMs);
  return undefined;
}

/** A 403 with no rate limit left is GitHub's secondary or primary rate limit, not a refusal. */
function isRateLimited(failure: GithubFailure): boolean {
  if (failure.status === 429) return true;
  return failure.status === 403 && (header(failure, 'x-ratelimit-remaining') === '0' || header(failure, 'retry-after') !== undefined);
}

export function classifyGithubFailure(
  failure: GithubFailure,
  context: { attempt: number; baseDelayMs: number; nowMs: number; random: () => number },
): ClassifiedFailure {
  const status = failure.status;
  const message = failure.message.slice(0, 300);
  const rateLimited = isRateLimited(failure);
  const retryable = rateLimited || status === undefined || status >= 500;
  const code = rateLimited ? 'rate_limited' : status === undefined ? 'network' : `github_${status}`;
  if (!retryable) return { retryable, code, message, delayMs: 0 };
  const backoff = context.baseDelayMs * 2 ** Math.max(0, context.attempt - 1);
  const jittered = Math.round(Math.min(MAX_DELAY_MS, backoff) * (0.5 + context.random() / 2));
  const requested = requestedDelayMs(failure, context.nowMs);
  return { retryable, code, message, delayMs: Math.min(MAX_DELAY_MS, Math.max(jittered, requested ?? 0)) };
}

/**
 * Whether GitHub refused access to a repository: a 404, or a 403 that is not a rate limit (GitHub
 * answers both for a repository the installation cannot read). Outages, rate limits and a refused
 * App JWT say nothing about the repository.
 */
export function refusesAccess(failure: GithubFailure): boolean {
  if (failure.status === 404) return true;
  return failure.status === 403 && !isRateLimited(failure);
}
