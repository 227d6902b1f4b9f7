/**
 * Authentication over real HTTP: every credential shape (none, malformed, unknown, revoked,
 * expired, a removed member's, the wrong role, a session), with status AND body.
 */
import { createApiKey, createSession, removeMember, revokeApiKey } from '../../src/identity/store';
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';

const UNAUTHORIZED = { error: 'unauthorized' };

describe('authentication matrix', () => {
  let stack: TestStack;
  let org: Awaited<ReturnType<typeof createTestOrg>>;
  const db = () => stack.services.database.db;

  beforeAll(async () => {
    stack = await startTestStack();
    org = await createTestOrg(db());
  });
  afterAll(() => stack.stop());

  it('no credentials → 401 {error:"unauthorized"}', async () => {
    const res = await stack.request('GET', '/v1/me');
    expect(res.status).toBe(401);
    expect(res.json).toEqual(UNAUTHORIZED);
  });

  it.each([
    ['an empty x-api-key', { 'x-api-key': '' }],
    ['a Bearer-prefixed x-api-key', { 'x-api-key': 'Bearer den_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }],
    ['a key without the den_ prefix', { 'x-api-key': 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }],
    ['a truncated key', { 'x-api-key': 'den_abc' }],
    ['Bearer with nothing after it', { authorization: 'Bearer' }],
    ['Bearer with a space only', { authorization: 'Bearer ' }],
    ['a Basic authorization', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['a bearer token with spaces', { authorization: 'Bearer abc def' }],
    ['a bearer token with odd characters', { authorization: 'Bearer <script>alert(1)</script>' }],
  ])('a malformed header (%s) → 401, never 500', async (_label, headers) => {
    const res = await stack.request('GET', '/v1/me', { headers });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(UNAUTHORIZED);
  });

  it('an unknown but well-formed key → 401', async () => {
    const res = await stack.request('GET', '/v1/me', { headers: { 'x-api-key': `den_${'A'.repeat(43)}` } });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(UNAUTHORIZED);
  });

  it('a revoked key → 401', async () => {
    const member = await org.addMember('admin');
    const key = await createApiKey(db(), { memberId: member.memberId, now: new Date() });
    expect((await stack.request('GET', '/v1/me', { headers: { 'x-api-key': key.apiKey } })).status).toBe(200);
    await revokeApiKey(db(), key.id, new Date());
    const res = await stack.request('GET', '/v1/me', { headers: { 'x-api-key': key.apiKey } });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(UNAUTHORIZED);
  });

  it('an expired key → 401', async () => {
    const member = await org.addMember('admin');
    const issued = new Date(Date.now() - 2 * 86_400_000);
    const key = await createApiKey(db(), { memberId: member.memberId, expiresInDays: 1, now: issued });
    const res = await stack.request('GET', '/v1/me', { headers: { 'x-api-key': key.apiKey } });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(UNAUTHORIZED);
  });

  it('a key of a removed member → 401', async () => {
    const member = await org.addMember('owner');
    expect((await stack.request('GET', '/v1/me', { headers: member.headers })).status).toBe(200);
    await removeMember(db(), member.memberId, new Date());
    const res = await stack.request('GET', '/v1/me', { headers: member.headers });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(UNAUTHORIZED);
  });

  it('a member-role key on an admin route → 403 admin_required', async () => {
    const member = await org.addMember('member');
    const res = await stack.request('GET', '/v1/organization/members', { headers: member.headers });
    expect(res.status).toBe(403);
    expect(res.json).toEqual({ error: 'forbidden', reason: 'admin_required', message: expect.any(String) });
  });

  it.each(['admin', 'owner'] as const)('an %s key on an admin route → 200', async (role) => {
    const member = role === 'owner' ? org.owner : await org.addMember(role);
    const res = await stack.request('GET', '/v1/organization/members', { headers: member.headers });
    expect(res.status).toBe(200);
    expect(res.json.members.map((m: { memberId: string }) => m.memberId)).toContain(member.memberId);
  });

  it('an API key resolves to the issuing user and the member it was scoped to', async () => {
    const member = await org.addMember('member');
    const res = await stack.request('GET', '/v1/me', { headers: member.headers });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      userId: member.userId,
      organizationId: org.organizationId,
      memberId: member.memberId,
      role: 'member',
      via: 'api_key',
    });
  });

  it('an expired session → 401', async () => {
    const member = await org.addMember('member');
    const session = await createSession(db(), { memberId: member.memberId, expiresInHours: 1, now: new Date(Date.now() - 2 * 3_600_000) });
    const res = await stack.request('GET', '/v1/me', { headers: { authorization: `Bearer ${session.token}` } });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(UNAUTHORIZED);
  });

  it('a valid session → 200, resolved to the active organization', async () => {
    const member = await org.addMember('admin');
    const session = await org.session(member.memberId);
    const res = await stack.request('GET', '/v1/me', { headers: { authorization: `Bearer ${session.token}` } });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      userId: member.userId,
      organizationId: org.organizationId,
      memberId: member.memberId,
      role: 'admin',
      via: 'session',
    });
  });

  it('an API key on a session-only route → 403 session_required', async () => {
    const res = await stack.request('POST', '/v1/session/active-organization', {
      headers: org.owner.headers,
      body: { organizationId: org.organizationId },
    });
    expect(res.status).toBe(403);
    expect(res.json).toEqual({ error: 'forbidden', reason: 'session_required', message: expect.any(String) });
  });

  it('a session switches organizations only into one where the user is a member', async () => {
    const other = await createTestOrg(db());
    const session = await org.session(org.owner.memberId);
    const auth = { authorization: `Bearer ${session.token}` };
    const refused = await stack.request('POST', '/v1/session/active-organization', {
      headers: auth,
      body: { organizationId: other.organizationId },
    });
    expect(refused.status).toBe(404);
    expect(refused.json.error).toBe('not_found');

    // Make the same user a member of the other organization, then switch.
    const { addMember } = await import('../../src/identity/store');
    const owner = await db().selectFrom('users').select('email').where('id', '=', org.owner.userId).executeTakeFirstOrThrow();
    const membership = await addMember(db(), { organizationId: other.organizationId, email: owner.email, role: 'member' });
    const switched = await stack.request('POST', '/v1/session/active-organization', {
      headers: auth,
      body: { organizationId: other.organizationId },
    });
    expect(switched.status).toBe(200);
    expect(switched.json).toMatchObject({ organizationId: other.organizationId, memberId: membership.memberId, role: 'member' });
    const me = await stack.request('GET', '/v1/me', { headers: auth });
    expect(me.json).toMatchObject({ organizationId: other.organizationId, memberId: membership.memberId, via: 'session' });
  });

  it('a bad body on the session route is a 400 InvalidRequestError', async () => {
    const session = await org.session(org.owner.memberId);
    const res = await stack.request('POST', '/v1/session/active-organization', {
      headers: { authorization: `Bearer ${session.token}` },
      body: { organizationId: 42 },
    });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'invalid_request', details: [expect.objectContaining({ path: ['organizationId'] })] });
  });

  it('records last_used_at off the hot path', async () => {
    const member = await org.addMember('member');
    await stack.request('GET', '/v1/me', { headers: member.headers });
    const deadline = Date.now() + 5000;
    let lastUsed: Date | null = null;
    while (!lastUsed && Date.now() < deadline) {
      const row = await db()
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('member_id', '=', member.memberId)
        .executeTakeFirstOrThrow();
      lastUsed = row.last_used_at;
      if (!lastUsed) await new Promise((r) => setTimeout(r, 50));
    }
    expect(lastUsed).toBeInstanceOf(Date);
  });

  it('stores only a hash and an 8-character prefix of the key', async () => {
    const row = await db().selectFrom('api_keys').selectAll().where('member_id', '=', org.owner.memberId).executeTakeFirstOrThrow();
    expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(row.prefix).toBe(org.owner.apiKey.slice(0, 8));
    expect(JSON.stringify(row)).not.toContain(org.owner.apiKey);
  });
});
