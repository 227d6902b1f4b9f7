import type { Db } from '../app/store/db';
import type { Role } from '../app/http/auth';
import { newApiKey, newId, newSessionToken } from './credentials';

/** Why a stored runner token no longer works (src/identity/runner-tokens.ts `runnerTokenRefusal`). */
export type RunnerTokenRefusal = { reason: 'runner_token_expired'; message: string } | { reason: 'runner_token_revoked'; message: string };

export interface ResolvedCredential {
  hash: string;
  userId: string;
  organizationId: string;
  memberId: string;
  role: Role;
  keyId?: string;
  /** API keys and runner tokens: when the credential expires. */
  expiresAt?: Date;
  /** Runner tokens (src/identity/runner-tokens.ts): the runner, and why the token no longer works, if it does not. */
  runner?: { id: string; label: string | null; refusal?: RunnerTokenRefusal };
}

/**
 * The live API keys among these hashes: not revoked, not expired, their member not removed. One
 * query for any number of them (src/identity/auth.ts folds lookups together under a flood).
 */
export async function findApiKeys(db: Db, hashes: string[], now: Date): Promise<Map<string, ResolvedCredential>> {
  const rows = await db
    .selectFrom('api_keys as k')
    .innerJoin('members as m', 'm.id', 'k.member_id')
    .select([
      'k.id as keyId',
      'k.key_hash as hash',
      'k.issued_by_user_id as userId',
      'm.organization_id as organizationId',
      'm.id as memberId',
      'm.role as role',
      'k.expires_at as expiresAt',
    ])
    .where('k.key_hash', 'in', hashes)
    .where('k.revoked_at', 'is', null)
    .where('k.expires_at', '>', now)
    .where('m.removed_at', 'is', null)
    .execute();
  return new Map(rows.map((row) => [row.hash, row]));
}

/** The live sessions among these hashes, each resolved to the user's membership in its active organization. */
export async function findSessions(db: Db, hashes: string[], now: Date): Promise<Map<string, ResolvedCredential>> {
  const rows = await db
    .selectFrom('sessions as s')
    .innerJoin('members as m', (join) =>
      join.onRef('m.user_id', '=', 's.user_id').onRef('m.organization_id', '=', 's.active_organization_id'),
    )
    .select(['s.token_hash as hash', 's.user_id as userId', 'm.organization_id as organizationId', 'm.id as memberId', 'm.role as role'])
    .where('s.token_hash', 'in', hashes)
    .where('s.expires_at', '>', now)
    .where('m.removed_at', 'is', null)
    .execute();
  return new Map(rows.map((row) => [row.hash, row]));
}

export async function touchApiKey(db: Db, keyId: string, now: Date): Promise<void> {
  await db.updateTable('api_keys').set({ last_used_at: now }).where('id', '=', keyId).execute();
}

export async function createOrganizationWithOwner(db: Db, input: { name: string; email: string }) {
  return db.transaction().execute(async (trx) => {
    const organizationId = newId('org');
    await trx.insertInto('organizations').values({ id: organizationId, name: input.name }).execute();
    const { userId } = await upsertUser(trx, input.email);
    const memberId = newId('mem');
    await trx.insertInto('members').values({ id: memberId, organization_id: organizationId, user_id: userId, role: 'owner' }).execute();
    return { organizationId, userId, memberId, role: 'owner' as const };
  });
}

async function upsertUser(db: Db, email: string): Promise<{ userId: string }> {
  const normalized = email.trim().toLowerCase();
  const inserted = await db
    .insertInto('users')
    .values({ id: newId('usr'), email: normalized })
    .onConflict((oc) => oc.column('email').doUpdateSet({ email: normalized }))
    .returning('id')
    .executeTakeFirstOrThrow();
  return { userId: inserted.id };
}

/** An organization's fairness weight: undefined for the default (1) or an unknown organization. */
export async function fairnessWeight(db: Db, organizationId: string): Promise<number | undefined> {
  const row = await db.selectFrom('organizations').select('fairness_weight').where('id', '=', organizationId).executeTakeFirst();
  return row?.fairness_weight ?? undefined;
}

/** Sets an organization's fairness weight (null: back to the default); API processes read it within their cache's TTL. */
export async function setFairnessWeight(db: Db, organizationId: string, weight: number | null) {
  const row = await db
    .updateTable('organizations')
    .set({ fairness_weight: weight })
    .where('id', '=', organizationId)
    .returning(['id', 'fairness_weight'])
    .executeTakeFirst();
  if (!row) throw new IdentityError(`no organization ${organizationId}`);
  return { organizationId: row.id, fairnessWeight: row.fairness_weight ?? 1 };
}

export class IdentityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'IdentityError';
  }
}

export async function addMember(db: Db, input: { organizationId: string; email: string; role: Role }) {
  return db.transaction().execute(async (trx) => {
    const org = await trx.selectFrom('organizations').select('id').where('id', '=', input.organizationId).executeTakeFirst();
    if (!org) throw new IdentityError(`organization ${input.organizationId} not found`);
    const { userId } = await upsertUser(trx, input.email);
    const existing = await trx
      .selectFrom('members')
      .select('id')
      .where('organization_id', '=', input.organizationId)
      .where('user_id', '=', userId)
      .where('removed_at', 'is', null)
      .executeTakeFirst();
    if (existing) throw new IdentityError(`${input.email} is already a member (${existing.id})`);
    const memberId = newId('mem');
    await trx
      .insertInto('members')
      .values({ id: memberId, organization_id: input.organizationId, user_id: userId, role: input.role })
      .execute();
    return { userId, memberId, role: input.role };
  });
}

/** Removing a member disables their keys and sessions in that organization (they stop resolving). */
export async function removeMember(db: Db, memberId: string, now: Date) {
  const result = await db
    .updateTable('members')
    .set({ removed_at: now })
    .where('id', '=', memberId)
    .where('removed_at', 'is', null)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) === 0) throw new IdentityError(`member ${memberId} not found or already removed`);
  return { memberId, removedAt: now.toISOString() };
}

/** A member that has not been removed, or an IdentityError. */
export async function liveMember(db: Db, memberId: string) {
  const member = await db.selectFrom('members').selectAll().where('id', '=', memberId).where('removed_at', 'is', null).executeTakeFirst();
  if (!member) throw new IdentityError(`member ${memberId} not found or removed`);
  return member;
}

export async function createApiKey(db: Db, input: { memberId: string; name?: string; expiresInDays?: number; now: Date }) {
  const member = await liveMember(db, input.memberId);
  const key = newApiKey();
  const id = newId('key');
  const expiresAt = new Date(input.now.getTime() + (input.expiresInDays ?? 90) * 86_400_000);
  await db
    .insertInto('api_keys')
    .values({
      id,
      key_hash: key.hash,
      prefix: key.prefix,
      name: input.name ?? 'default',
      member_id: member.id,
      issued_by_user_id: member.user_id,
      expires_at: expiresAt,
      created_at: input.now,
    })
    .execute();
  return { id, apiKey: key.raw, expiresAt: expiresAt.toISOString() };
}

export async function revokeApiKey(db: Db, id: string, now: Date) {
  const result = await db
    .updateTable('api_keys')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) === 0) throw new IdentityError(`API key ${id} not found or already revoked`);
  return { id, revokedAt: now.toISOString() };
}

export async function createSession(db: Db, input: { memberId: string; expiresInHours?: number; now: Date }) {
  const member = await liveMember(db, input.memberId);
  const token = newSessionToken();
  const expiresAt = new Date(input.now.getTime() + (input.expiresInHours ?? 24) * 3_600_000);
  await db
    .insertInto('sessions')
    .values({
      id: newId('ses'),
      token_hash: token.hash,
      user_id: member.user_id,
      active_organization_id: member.organization_id,
      expires_at: expiresAt,
      created_at: input.now,
    })
    .execute();
  return { token: token.raw, expiresAt: expiresAt.toISOString() };
}

/** Switches a session's active organization; the user must be a live member there. */
export async function switchActiveOrganization(db: Db, input: { tokenHash: string; userId: string; organizationId: string }) {
  const member = await db
    .selectFrom('members')
    .select(['id', 'role'])
    .where('user_id', '=', input.userId)
    .where('organization_id', '=', input.organizationId)
    .where('removed_at', 'is', null)
    .executeTakeFirst();
  if (!member) return undefined;
  await db
    .updateTable('sessions')
    .set({ active_organization_id: input.organizationId })
    .where('token_hash', '=', input.tokenHash)
    .execute();
  return { organizationId: input.organizationId, memberId: member.id, role: member.role };
}

export async function listMembers(db: Db, organizationId: string) {
  return db
    .selectFrom('members as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select(['m.id as memberId', 'u.id as userId', 'u.email as email', 'm.role as role', 'm.created_at as createdAt'])
    .where('m.organization_id', '=', organizationId)
    .where('m.removed_at', 'is', null)
    .orderBy('m.created_at')
    .execute();
}

async function assertOrganization(db: Db, organizationId: string): Promise<void> {
  const org = await db.selectFrom('organizations').select('id').where('id', '=', organizationId).executeTakeFirst();
  if (!org) throw new IdentityError(`organization ${organizationId} not found`);
}

/**
 * An organization's members for `den members list`: the live ones, and the removed ones too when
 * asked. Columns are named one by one, so nothing added to the tables later is printed unasked.
 */
export async function listOrganizationMembers(db: Db, input: { organizationId: string; includeRemoved?: boolean }) {
  await assertOrganization(db, input.organizationId);
  let query = db
    .selectFrom('members as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select([
      'm.id as memberId',
      'u.id as userId',
      'u.email as email',
      'm.role as role',
      'm.created_at as createdAt',
      'm.removed_at as removedAt',
    ])
    .where('m.organization_id', '=', input.organizationId);
  if (!input.includeRemoved) query = query.where('m.removed_at', 'is', null);
  return query.orderBy('m.created_at').orderBy('m.id').execute();
}

type ApiKeyStatus = 'active' | 'revoked' | 'expired' | 'member_removed';

/**
 * API keys for `den api-keys list`, revoked and expired ones included, each with whether it still
 * works. Never key material: neither the hash nor the stored prefix of the raw key is selected.
 */
export async function listApiKeys(db: Db, input: { organizationId?: string; memberId?: string; now: Date }) {
  if (input.organizationId) await assertOrganization(db, input.organizationId);
  if (input.memberId) {
    const member = await db.selectFrom('members').select('id').where('id', '=', input.memberId).executeTakeFirst();
    if (!member) throw new IdentityError(`member ${input.memberId} not found`);
  }
  let query = db
    .selectFrom('api_keys as k')
    .innerJoin('members as m', 'm.id', 'k.member_id')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select([
      'k.id as id',
      'k.name as name',
      'm.organization_id as organizationId',
      'm.id as memberId',
      'u.email as email',
      'm.role as role',
      'k.created_at as createdAt',
      'k.expires_at as expiresAt',
      'k.last_used_at as lastUsedAt',
      'k.revoked_at as revokedAt',
      'm.removed_at as memberRemovedAt',
    ]);
  if (input.organizationId) query = query.where('m.organization_id', '=', input.organizationId);
  if (input.memberId) query = query.where('m.id', '=', input.memberId);
  const rows = await query.orderBy('k.created_at').orderBy('k.id').execute();
  return rows.map(({ memberRemovedAt, ...key }) => {
    const status: ApiKeyStatus = key.revokedAt
      ? 'revoked'
      : memberRemovedAt
        ? 'member_removed'
        : key.expiresAt <= input.now
          ? 'expired'
          : 'active';
    return { ...key, status };
  });
}
