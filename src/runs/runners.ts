/**
 * The runtimes of an organization as `GET /v1/automation-runners` lists them, and what
 * `POST /v1/automation-runners/token` and `DELETE /v1/automation-runners/{runnerId}` do. Runners and
 * their tokens are the identity feature's (src/identity/runner-tokens.ts); presence
 * (src/runs/presence.ts) and the member's breaker (src/runs/breaker-store.ts) are this feature's.
 *
 * Listed: every runner of a runner token that still works, online or not, and every API-key
 * runtime seen within RUNNER_TOKEN_TTL (the life a token-holding runtime has after it stops), its
 * member still in the organization.
 */
import { isAdmin, type Principal } from '../app/http/auth';
import type { Db } from '../app/store/db';
import { issueRunnerToken, liveRunners, revokeRunner, findRunner, type RunnerTokenGrant } from '../identity';
import { breakerPhase, type BreakerPhase, type BreakerState } from './breaker';
import { breakersOf } from './breaker-store';
import { forgetPresence, presenceRows, runEntry, type PresenceRow } from './presence';
import type { RunnerSettings } from './runner-settings';

export interface RunnerView {
  runnerId: string;
  memberId: string;
  credential: 'runner_token' | 'api_key';
  label: string | null;
  version: string | null;
  online: boolean;
  /** ms since the epoch; null for a runner never seen claiming or heartbeating. */
  lastSeenAt: number | null;
  /** Runs it holds now: runs it was seen working on whose attempt is still running. */
  runs: number;
  /** Its member's breaker is open: their requests start no run until `pausedUntil` (ms). */
  paused: boolean;
  pausedUntil?: number;
  breaker: BreakerPhase;
}

/** When the runners are looked at (ms), and the settings that say which are online. */
export interface RunnerMoment {
  settings: RunnerSettings;
  now: number;
}

/** The caller's own runtimes (a member) or the organization's (an owner or admin), oldest first (minted, or first seen). */
export async function listRunnerViews(db: Db, principal: Principal, { settings, now }: RunnerMoment): Promise<RunnerView[]> {
  const organizationId = principal.organizationId;
  const memberId = isAdmin(principal.role) ? undefined : principal.memberId;
  const registered = await liveRunners(db, { organizationId, memberId, now: new Date(now) });
  const seen = await presenceRows(db, {
    organizationId,
    memberId,
    runnerIds: registered.map((runner) => runner.runnerId),
    apiKeySince: new Date(now - settings.tokenTtlMs),
  });
  const presence = new Map(seen.map((row) => [row.runnerId, row]));
  const runners = [
    ...registered.map((runner) => ({ ...runner, credential: 'runner_token' as const, presence: presence.get(runner.runnerId) })),
    ...seen
      .filter((row) => row.credential === 'api_key')
      .map((row) => ({
        runnerId: row.runnerId,
        memberId: row.memberId,
        label: row.label,
        createdAt: row.firstSeenAt,
        credential: 'api_key' as const,
        presence: row,
      })),
  ].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.runnerId.localeCompare(b.runnerId));
  const breakers = await breakersOf(db, organizationId, [...new Set(runners.map((runner) => runner.memberId))]);
  const running = await runningAttempts(db, organizationId, seen);
  return runners.map((runner) => {
    const lastSeenAt = runner.presence?.lastSeenAt.getTime() ?? null;
    return {
      runnerId: runner.runnerId,
      memberId: runner.memberId,
      credential: runner.credential,
      label: runner.label,
      version: runner.presence?.version ?? null,
      online: lastSeenAt !== null && lastSeenAt > now - settings.presenceWindowMs,
      lastSeenAt,
      runs: (runner.presence?.runs ?? []).filter((entry) => running.has(entry)).length,
      ...pauseOf(breakers.get(runner.memberId), now),
    };
  });
}

function pauseOf(state: BreakerState | undefined, now: number): Pick<RunnerView, 'paused' | 'pausedUntil' | 'breaker'> {
  const breaker = state ? breakerPhase(state, now) : 'closed';
  return breaker === 'open' ? { paused: true, pausedUntil: state!.pausedUntil!, breaker } : { paused: false, breaker };
}

/** The `attempt:runId` entries among these rows whose run is running that attempt now. */
async function runningAttempts(db: Db, organizationId: string, rows: PresenceRow[]): Promise<Set<string>> {
  const runIds = [...new Set(rows.flatMap((row) => row.runs.map((entry) => entry.slice(entry.indexOf(':') + 1))))];
  if (runIds.length === 0) return new Set();
  const live = await db
    .selectFrom('automation_runs')
    .select(['run_id', 'attempt'])
    .where('organization_id', '=', organizationId)
    .where('run_id', 'in', runIds)
    .where('status', '=', 'running')
    .execute();
  return new Set(live.map((run) => runEntry({ runId: run.run_id, attempt: run.attempt })));
}

/** What a new runner token is minted with: the runner's label (a new runner only), its life, and when (ms). */
export interface RunnerTokenAsk {
  label: string | undefined;
  ttlMs: number;
  now: number;
}

/**
 * A runner token for the caller: a new runner of their member (an API key or a session asks),
 * or a new token of the caller's own runner (its runner token asks: renewal, same runner id).
 */
export async function mintRunnerToken(db: Db, principal: Principal, { label, ttlMs, now }: RunnerTokenAsk): Promise<RunnerTokenGrant> {
  const base = { organizationId: principal.organizationId, memberId: principal.memberId, ttlMs, now: new Date(now) };
  if (principal.via === 'runner_token' && principal.runner) return issueRunnerToken(db, { ...base, runnerId: principal.runner.id });
  return issueRunnerToken(db, { ...base, apiKeyId: principal.apiKeyId, label });
}

/** Which runtime is deleted, and when (ms). */
export interface RunnerDeletion {
  runnerId: string;
  now: number;
}

/**
 * Deletes one of the caller's runtimes (any of the organization's, for an owner or admin): a
 * runner's tokens stop at once; an API-key runtime's presence is forgotten (it is listed again if
 * it calls again: revoke its key to stop it). False when the caller has no such runtime.
 */
export async function deleteRunner(db: Db, principal: Principal, { runnerId, now }: RunnerDeletion): Promise<boolean> {
  const organizationId = principal.organizationId;
  const memberId = isAdmin(principal.role) ? undefined : principal.memberId;
  const runner = await findRunner(db, organizationId, runnerId);
  if (runner && memberId !== undefined && runner.memberId !== memberId) return false;
  if (runner) {
    await revokeRunner(db, { organizationId, runnerId, memberId, now: new Date(now) });
    await forgetPresence(db, { organizationId, runnerId, memberId });
    return true;
  }
  return forgetPresence(db, { organizationId, runnerId, memberId });
}
