/**
 * Runner tokens: short-lived credentials a runtime holds instead of its member's API key. Each is
 * bound to one organization, member and runner; only its hash is stored. A token stops working
 * when it expires, when its runner is revoked (`DELETE /v1/automation-runners/{runnerId}`), when
 * its member is removed, and when the API key that minted its runner is revoked or expires:
 * `runnerTokenRefusal` is that rule, written once, for the authenticator and the runners list.
 */
import type { Db } from '../app/store/db';
import type { Role } from '../app/http/auth';
import { newId, newRunnerToken } from './credentials';
import type { ResolvedCredential, RunnerTokenRefusal } from './store';

/** What the refusal rule reads of a token, its runner, its member and the API key that minted it. */
interface RunnerTokenFacts {
  tokenExpiresAt: Date;
  runnerRevokedAt: Date | null;
  memberRemovedAt: Date | null;
  apiKeyId: string | null;
  keyRevokedAt: Date | null;
  keyExpiresAt: Date | null;
}

/** The one rule: revoked (runner, member, key) before expired, so the answer names what an operator did. */
function runnerTokenRefusal(facts: RunnerTokenFacts, now: Date): RunnerTokenRefusal | undefined {
  const revoked = (message: string) => ({ reason: 'runner_token_revoked' as const, message });
  if (facts.runnerRevokedAt !== null) return revoked('The runner was deleted.');
  if (facts.memberRemovedAt !== null) return revoked('Its member was removed from the organization.');
  if (facts.apiKeyId !== null && facts.keyRevokedAt !== null) return revoked('The API key that minted it was revoked.');
  if (facts.apiKeyId !== null && facts.keyExpiresAt !== null && facts.keyExpiresAt <= now) {
    return revoked('The API key that minted it has expired.');
  }
  if (facts.tokenExpiresAt <= now) {
    return { reason: 'runner_token_expired', message: 'The runner token has expired: mint a new one with an API key.' };
  }
  return undefined;
}

/** The joins every read of runner tokens shares: token → runner → member, and the key that minted it. */
function tokenFacts(db: Db) {
  return db
    .selectFrom('runner_tokens as t')
    .innerJoin('runners as r', 'r.id', 't.runner_id')
    .innerJoin('members as m', 'm.id', 'r.member_id')
    .leftJoin('api_keys as k', 'k.id', 'r.api_key_id')
    .select([
      't.token_hash as hash',
      't.expires_at as tokenExpiresAt',
      'r.id as runnerId',
      'r.label as label',
      'r.organization_id as organizationId',
      'r.member_id as memberId',
      'r.revoked_at as runnerRevokedAt',
      'r.api_key_id as apiKeyId',
      'r.created_at as createdAt',
      'm.user_id as userId',
      'm.role as role',
      'm.removed_at as memberRemovedAt',
      'k.revoked_at as keyRevokedAt',
      'k.expires_at as keyExpiresAt',
    ]);
}

/**
 * The runner tokens among these hashes, working or not (a refusal says why not), as credentials.
 * One query for any number of them (src/identity/auth.ts folds lookups together under a flood).
 */
export async function findRunnerTokens(db: Db, hashes: string[], now: Date): Promise<Map<string, ResolvedCredential>> {
  const rows = await tokenFacts(db).where('t.token_hash', 'in', hashes).execute();
  return new Map(
    rows.map((row) => [
      row.hash,
      {
        hash: row.hash,
        userId: row.userId,
        organizationId: row.organizationId,
        memberId: row.memberId,
        role: row.role as Role,
        expiresAt: row.tokenExpiresAt,
        runner: { id: row.runnerId, label: row.label, refusal: runnerTokenRefusal(row, now) },
      },
    ]),
  );
}

export interface RunnerTokenGrant {
  token: string;
  runnerId: string;
  /** When the token stops working (ms since the epoch). */
  expiresAt: number;
}

/**
 * A token for a new runner of the member (first mint: `apiKeyId` is the key that asks, absent for a
 * session), or a new token of an existing runner (renewal: `runnerId`, asked with a token of that
 * runner, which stays valid until its own expiry). The raw token is returned once.
 */
export async function issueRunnerToken(
  db: Db,
  input: { organizationId: string; memberId: string; apiKeyId?: string; runnerId?: string; label?: string; ttlMs: number; now: Date },
): Promise<RunnerTokenGrant> {
  const token = newRunnerToken();
  const expiresAt = new Date(input.now.getTime() + input.ttlMs);
  const runnerId = input.runnerId ?? newId('rnr');
  await db.transaction().execute(async (trx) => {
    if (input.runnerId === undefined) {
      await trx
        .insertInto('runners')
        .values({
          id: runnerId,
          organization_id: input.organizationId,
          member_id: input.memberId,
          label: input.label ?? null,
          api_key_id: input.apiKeyId ?? null,
          created_at: input.now,
        })
        .execute();
    }
    await trx
      .insertInto('runner_tokens')
      .values({ token_hash: token.hash, runner_id: runnerId, created_at: input.now, expires_at: expiresAt })
      .execute();
  });
  return { token: token.raw, runnerId, expiresAt: expiresAt.getTime() };
}

/**
 * Revokes a runner of the organization (of this member only, when `memberId` is given): every
 * token of it stops at once. False when there is no such runner, or it was revoked already.
 */
export async function revokeRunner(
  db: Db,
  input: { organizationId: string; runnerId: string; memberId?: string; now: Date },
): Promise<boolean> {
  let query = db
    .updateTable('runners')
    .set({ revoked_at: input.now })
    .where('id', '=', input.runnerId)
    .where('organization_id', '=', input.organizationId)
    .where('revoked_at', 'is', null);
  if (input.memberId !== undefined) query = query.where('member_id', '=', input.memberId);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export interface LiveRunner {
  runnerId: string;
  memberId: string;
  label: string | null;
  createdAt: Date;
  /** When its newest working token expires. */
  expiresAt: Date;
}

/**
 * The organization's runners (one member's, when `memberId` is given) that hold a working token:
 * a runtime that could still claim or report, online or not.
 */
export async function liveRunners(db: Db, input: { organizationId: string; memberId?: string; now: Date }): Promise<LiveRunner[]> {
  let query = tokenFacts(db).where('r.organization_id', '=', input.organizationId).where('t.expires_at', '>', input.now);
  if (input.memberId !== undefined) query = query.where('r.member_id', '=', input.memberId);
  const rows = await query.execute();
  const runners = new Map<string, LiveRunner>();
  for (const row of rows) {
    if (runnerTokenRefusal(row, input.now) !== undefined) continue;
    const seen = runners.get(row.runnerId);
    if (seen && seen.expiresAt >= row.tokenExpiresAt) continue;
    runners.set(row.runnerId, {
      runnerId: row.runnerId,
      memberId: row.memberId,
      label: row.label,
      createdAt: row.createdAt,
      expiresAt: row.tokenExpiresAt,
    });
  }
  return [...runners.values()].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.runnerId.localeCompare(b.runnerId));
}

/** A runner of the organization whether or not it still works (its member, to check who may delete it). */
export async function findRunner(db: Db, organizationId: string, runnerId: string) {
  return db
    .selectFrom('runners')
    .select(['id', 'member_id as memberId', 'api_key_id as apiKeyId', 'revoked_at as revokedAt'])
    .where('organization_id', '=', organizationId)
    .where('id', '=', runnerId)
    .executeTakeFirst();
}
