/**
 * Runner tokens as the authenticator takes them: `Authorization: Bearer den_rt_…`, told apart
 * from a session by the prefix. They follow the API keys' rules (src/identity/auth.ts): every
 * request checks the token against Postgres whenever Postgres answers, through the same lookups
 * (a flood of unknown tokens costs a bounded number of queries and never refuses a valid one), so
 * a revocation counts at once on every API process that can reach Postgres.
 *
 * A token this process verified is remembered only to ride out a Postgres outage, until its own
 * expiry, so runtimes keep their runs' leases through it as API keys do. Every change that stops
 * runner tokens is announced on the `runner_tokens` channel (a trigger, migration
 * 0016_runners), and each process then forgets every token it remembered: a token revoked before
 * an outage is not trusted during it. So a token is remembered only when verified while this
 * process listens on the channel. When the notification connection is lost, what was remembered
 * stays (every announcement up to then was heard, and the outage that cut the connection is what
 * the memory is for); when it is opened again, everything is forgotten, since an announcement
 * may have been missed meanwhile.
 */
import { AppError, errors } from '../app/errors';
import { boundedCache } from '../app/bounded-caches';
import type { Principal } from '../app/http/auth';
import type { Metrics } from '../app/metrics';
import type { Channels } from '../app/store/channels';
import { RUNNER_TOKEN_PREFIX, hashSecret, isWellFormedRunnerToken } from './credentials';
import type { ResolvedCredential } from './store';

/** The Postgres channel on which every change that stops runner tokens is announced. */
const RUNNER_TOKENS_CHANNEL = 'runner_tokens';

/** Runner tokens this process verified, kept only to ride out a Postgres outage. */
const REMEMBERED_MAX = 10_000;

/** Whether a bearer credential is meant as a runner token (its prefix), whatever else it is. */
export const isRunnerBearer = (raw: string | undefined): boolean => raw !== undefined && raw.startsWith(RUNNER_TOKEN_PREFIX);

/** The 401 for a runner token no one issued (or one not even shaped like one). */
export const unknownRunnerToken = () =>
  errors.unauthorized('runner_token_unknown', 'No such runner token: mint one with POST /v1/automation-runners/token.');

/** Looks a token's hash up (directly when this process trusts it, else batched with other first sightings). */
export type RunnerTokenResolver = (hash: string, at: Date) => Promise<ResolvedCredential | undefined>;

export function createRunnerTokenAuth(
  deps: { metrics: Metrics; channels?: Channels },
  resolve: RunnerTokenResolver,
): (raw: string, at: Date) => Promise<Principal> {
  const remembered = boundedCache<{ principal: Principal; expiresAt: number }>({ max: REMEMBERED_MAX });
  const forget = () => remembered.clear();
  const subscription = deps.channels?.subscribe(RUNNER_TOKENS_CHANNEL, {
    notified: forget,
    // Told on both: lost (not listening now), keep; (re)opened (listening again), forget.
    reset: () => subscription?.listening && forget(),
  });
  const refuse = (error: AppError) => {
    deps.metrics.authFailures.inc({ surface: 'credentials', outcome: 'rejected' });
    return error;
  };

  return async (raw, at) => {
    if (!isWellFormedRunnerToken(raw)) throw unknownRunnerToken();
    const hash = hashSecret(raw);
    let found: ResolvedCredential | undefined;
    try {
      found = await resolve(hash, at);
    } catch (error) {
      const kept = remembered.get(hash);
      if (kept && error instanceof AppError && error.dependency === 'postgres' && kept.expiresAt > at.getTime()) return kept.principal;
      throw error;
    }
    if (!found?.runner) {
      remembered.delete(hash);
      throw refuse(unknownRunnerToken());
    }
    const { refusal } = found.runner;
    if (refusal) {
      remembered.delete(hash);
      throw refuse(errors.unauthorized(refusal.reason, refusal.message));
    }
    const principal: Principal = {
      userId: found.userId,
      organizationId: found.organizationId,
      memberId: found.memberId,
      role: 'member',
      via: 'runner_token',
      runner: { id: found.runner.id, label: found.runner.label },
    };
    if (subscription?.listening) remembered.set(hash, { principal, expiresAt: found.expiresAt?.getTime() ?? 0 });
    else remembered.delete(hash);
    return principal;
  };
}
