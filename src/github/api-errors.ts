/**
 * How a failed GitHub API call is handled, as pure functions. Three kinds, and nothing else:
 *
 * - a rate limit (GitHub's primary limit, a 403 or 429 with `x-ratelimit-remaining: 0`; or a
 *   secondary limit, a 429, or a 403 with `retry-after` or saying "rate limit") is waited out,
 *   however long, until the time GitHub names (`x-ratelimit-reset`, `retry-after`); without one,
 *   at least a minute, doubled for each limit met in a row, up to an hour. A wait is not an attempt.
 * - a network error or a 5xx is retried with exponential backoff and full jitter, within the
 *   sync's attempts;
 * - anything else (401, 403, 404, 409, 422, …) is final at once.
 */

/** What a failure looks like from the REST client: its HTTP status (none for a network error) and headers. */
export interface GithubFailure {
  status?: number;
  headers?: Record<string, string | number | undefined>;
  message: string;
}

export type RateLimitKind = 'primary' | 'secondary';

export type ClassifiedFailure =
  /** Retried within the sync's attempts, after `delayMs`. */
  | { kind: 'retry'; code: string; message: string; delayMs: number }
  /** Waited out until `untilMs` (epoch ms) on a timer, without using an attempt. */
  | { kind: 'rate_limited'; code: 'rate_limited'; limit: RateLimitKind; message: string; untilMs: number; headerless: boolean }
  | { kind: 'final'; code: string; message: string };

/** The longest backoff between two attempts of a retryable (5xx, network) failure. */
const MAX_RETRY_DELAY_MS = 5 * 60_000;
/** GitHub: without `retry-after`, wait at least one minute before retrying after a secondary limit. */
export const MIN_RATE_LIMIT_WAIT_MS = 60_000;
/** The longest wait a limit without a stated time is given (the doubling stops there): a primary window's hour. */
export const MAX_HEADERLESS_WAIT_MS = 60 * 60_000;

function header(failure: GithubFailure, name: string): string | undefined {
  const value = failure.headers?.[name];
  return value === undefined ? undefined : String(value);
}

function finiteHeader(failure: GithubFailure, name: string): number | undefined {
  const raw = header(failure, name);
  if (raw === undefined || raw.trim() === '') return undefined;
  const value = Number(raw);
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}

/** GitHub's primary limit: none of the hour's requests remain. */
export function isPrimaryLimit(failure: GithubFailure): boolean {
  return (failure.status === 403 || failure.status === 429) && header(failure, 'x-ratelimit-remaining') === '0';
}

/** GitHub's secondary limits: any 429, and a 403 with `retry-after` or whose message names a rate limit or abuse detection. */
function isSecondaryLimit(failure: GithubFailure): boolean {
  if (failure.status === 429) return true;
  if (failure.status !== 403) return false;
  return header(failure, 'retry-after') !== undefined || /rate limit|abuse detection/i.test(failure.message);
}

/** Whether GitHub refused the call for a rate limit, primary or secondary. */
export function isRateLimited(failure: GithubFailure): boolean {
  return isPrimaryLimit(failure) || isSecondaryLimit(failure);
}

/**
 * Until when a rate limit holds. The time GitHub states wins (`x-ratelimit-reset` for a primary
 * limit, `retry-after` for any); without one, `MIN_RATE_LIMIT_WAIT_MS` doubled for each limit in a
 * row without a stated time (`strikes`, 0 for the first), up to `MAX_HEADERLESS_WAIT_MS`.
 */
function rateLimitUntil(failure: GithubFailure, nowMs: number, strikes: number): { untilMs: number; headerless: boolean } {
  const stated: number[] = [];
  const retryAfter = finiteHeader(failure, 'retry-after');
  if (retryAfter !== undefined) stated.push(nowMs + retryAfter * 1000);
  const reset = finiteHeader(failure, 'x-ratelimit-reset');
  if (isPrimaryLimit(failure) && reset !== undefined) stated.push(reset * 1000);
  if (stated.length > 0) return { untilMs: Math.max(nowMs, ...stated), headerless: false };
  const backoff = Math.min(MAX_HEADERLESS_WAIT_MS, MIN_RATE_LIMIT_WAIT_MS * 2 ** Math.min(strikes, 16));
  return { untilMs: nowMs + backoff, headerless: true };
}

export function classifyGithubFailure(
  failure: GithubFailure,
  context: { attempt: number; baseDelayMs: number; nowMs: number; random: () => number; rateLimitStrikes?: number },
): ClassifiedFailure {
  const status = failure.status;
  const message = failure.message.replace(/\u0000/g, '').slice(0, 300);
  if (isRateLimited(failure)) {
    const limit: RateLimitKind = isPrimaryLimit(failure) ? 'primary' : 'secondary';
    return {
      kind: 'rate_limited',
      code: 'rate_limited',
      limit,
      message,
      ...rateLimitUntil(failure, context.nowMs, context.rateLimitStrikes ?? 0),
    };
  }
  if (status !== undefined && status < 500) return { kind: 'final', code: `github_${status}`, message };
  const backoff = context.baseDelayMs * 2 ** Math.max(0, context.attempt - 1);
  const delayMs = Math.round(Math.min(MAX_RETRY_DELAY_MS, backoff) * (0.5 + context.random() / 2));
  return { kind: 'retry', code: status === undefined ? 'network' : `github_${status}`, message, delayMs };
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
