/**
 * Runner tokens over real HTTP: minted with an API key or a session, renewed with themselves,
 * bound to their organization, member and runner, stored as a hash only; they open the run routes
 * with their member's reach and nothing else (403 `runner_token`), and stop at once (401 with the
 * reason) when their runner is deleted, the key that minted them revoked, their member removed, or
 * they expire. A flood of unknown tokens never refuses a valid one.
 */
import { createHash } from 'node:crypto';
import { removeMember, revokeApiKey } from '../../src/identity/store';
import { createTestOrg, type TestMember } from '../harness/identity';
import { event, newRunId, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
const db = () => stack.services.database.db;
beforeAll(async () => {
  stack = await startTestStack({ worker: true });
  org = await createTestOrg(db());
});
afterAll(() => stack.stop());

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function mint(headers: Record<string, string>, body: unknown = {}) {
  const res = await stack.request('POST', '/v1/automation-runners/token', { headers, body });
  expect(res.status).toBe(201);
  return res.json as { token: string; runnerId: string; expiresAt: number };
}

/** The API key id behind a member's key (the runners table keeps it). */
async function keyIdOf(member: TestMember): Promise<string> {
  const hash = createHash('sha256').update(member.apiKey).digest('hex');
  return (await db().selectFrom('api_keys').select('id').where('key_hash', '=', hash).executeTakeFirstOrThrow()).id;
}

it('mints a token with an API key: den_rt_, bound to a new runner, living RUNNER_TOKEN_TTL, stored as its hash only', async () => {
  const member = await org.addMember('member');
  const before = Date.now();
  const grant = await mint(member.headers, { label: 'laptop' });
  expect(grant.token).toMatch(/^den_rt_[A-Za-z0-9_-]{43}$/);
  expect(grant.runnerId).toMatch(/^rnr_/);
  expect(grant.expiresAt).toBeGreaterThanOrEqual(before + 12 * 3_600_000);
  expect(grant.expiresAt).toBeLessThanOrEqual(Date.now() + 12 * 3_600_000);

  const runner = await db().selectFrom('runners').selectAll().where('id', '=', grant.runnerId).executeTakeFirstOrThrow();
  expect(runner).toMatchObject({
    organization_id: org.organizationId,
    member_id: member.memberId,
    label: 'laptop',
    api_key_id: await keyIdOf(member),
  });
  const tokens = await db().selectFrom('runner_tokens').selectAll().where('runner_id', '=', grant.runnerId).execute();
  expect(tokens).toHaveLength(1);
  expect(tokens[0]!.token_hash).toBe(createHash('sha256').update(grant.token).digest('hex'));
  expect(JSON.stringify([runner, tokens])).not.toContain(grant.token.slice('den_rt_'.length));
});

it('mints with a session too (no key behind it), and refuses a label that is not printable text', async () => {
  const member = await org.addMember('member');
  const session = await org.session(member.memberId);
  const grant = await mint(bearer(session.token));
  const runner = await db().selectFrom('runners').selectAll().where('id', '=', grant.runnerId).executeTakeFirstOrThrow();
  expect(runner).toMatchObject({ member_id: member.memberId, api_key_id: null, label: null });
  const bad = await stack.request('POST', '/v1/automation-runners/token', { headers: member.headers, body: { label: 'a\nb' } });
  expect(bad).toMatchObject({ status: 400, json: { error: 'invalid_request' } });
});

it('renews itself: same runner, a new token and expiry; the old one works until it expires', async () => {
  const member = await org.addMember('member');
  const first = await mint(member.headers, { label: 'ci' });
  const renewed = await mint(bearer(first.token), { label: 'ignored on renewal' });
  expect(renewed.runnerId).toBe(first.runnerId);
  expect(renewed.token).not.toBe(first.token);
  expect(renewed.expiresAt).toBeGreaterThanOrEqual(first.expiresAt);
  for (const token of [first.token, renewed.token])
    expect((await stack.request('GET', '/v1/automation-runs', { headers: bearer(token) })).status).toBe(200);
  const runner = await db().selectFrom('runners').select('label').where('id', '=', first.runnerId).executeTakeFirstOrThrow();
  expect(runner.label).toBe('ci');
});

it('opens only the run routes: any other route is 403 {error:"forbidden", reason:"runner_token"}', async () => {
  const admin = await org.addMember('admin');
  const { token, runnerId } = await mint(admin.headers);
  const refused = [
    ['GET', '/v1/organization/members'],
    ['GET', '/v1/integrations/slack/connections'],
    ['POST', '/v1/mcp-connections/resolve'],
    ['GET', '/v1/me'],
    ['GET', '/v1/automation-runners'],
    ['DELETE', `/v1/automation-runners/${runnerId}`],
  ] as const;
  for (const [method, path] of refused) {
    const res = await stack.request(method, path, { headers: bearer(token), body: method === 'POST' ? { query: 'notion' } : undefined });
    expect({ path, status: res.status, json: res.json }).toEqual({
      path,
      status: 403,
      json: { error: 'forbidden', reason: 'runner_token', message: expect.any(String) },
    });
  }
  // The admin's own key still opens them.
  expect((await stack.request('GET', '/v1/organization/members', { headers: admin.headers })).status).toBe(200);
});

it("reaches only its own member's runs, even an admin's token", async () => {
  const admin = await org.addMember('admin');
  const other = await org.addMember('member');
  const { token } = await mint(admin.headers);
  const theirs = newRunId();
  expect((await runsClient(stack, other.headers).postEvent(theirs, event(1, 1))).status).toBe(200);
  await runsClient(stack, other.headers).waitForStatus(theirs, ['running']);
  expect((await runsClient(stack, admin.headers).get(theirs)).status).toBe(200);

  const asRunner = runsClient(stack, bearer(token));
  expect(await asRunner.get(theirs)).toMatchObject({ status: 404, json: { error: 'not_found' } });
  expect(await asRunner.heartbeat(theirs, 1)).toMatchObject({ status: 404 });
  const mine = newRunId();
  expect((await asRunner.postEvent(mine, event(1, 1))).status).toBe(200);
  await asRunner.waitForStatus(mine, ['running']);
  const listed = (await asRunner.list()).json.runs.map((run: { id: string }) => run.id);
  expect(listed).toContain(mine);
  expect(listed).not.toContain(theirs);
  expect(await asRunner.get(mine)).toMatchObject({ status: 200, json: { memberId: admin.memberId } });
}, 30_000);

describe('stops at once, with the reason', () => {
  const revoked = { error: 'unauthorized', reason: 'runner_token_revoked', message: expect.any(String) };
  const ask = (token: string) => stack.request('GET', '/v1/automation-runs', { headers: bearer(token) });

  it('when its runner is deleted: every token of it, the renewed one included', async () => {
    const member = await org.addMember('member');
    const first = await mint(member.headers);
    const renewed = await mint(bearer(first.token));
    expect((await ask(renewed.token)).status).toBe(200);
    expect((await stack.request('DELETE', `/v1/automation-runners/${first.runnerId}`, { headers: member.headers })).status).toBe(204);
    for (const token of [first.token, renewed.token]) {
      expect(await ask(token)).toMatchObject({ status: 401, json: { ...revoked, message: 'The runner was deleted.' } });
    }
    expect(await stack.request('POST', '/v1/automation-runners/token', { headers: bearer(first.token), body: {} })).toMatchObject({
      status: 401,
    });
    // Deleting again is no error; another member's runner, or none, is a 404.
    expect((await stack.request('DELETE', `/v1/automation-runners/${first.runnerId}`, { headers: member.headers })).status).toBe(204);
    const stranger = await org.addMember('member');
    const theirs = await mint(stranger.headers);
    expect(await stack.request('DELETE', `/v1/automation-runners/${theirs.runnerId}`, { headers: member.headers })).toMatchObject({
      status: 404,
      json: { error: 'not_found' },
    });
    expect((await ask(theirs.token)).status).toBe(200);
    expect((await stack.request('DELETE', '/v1/automation-runners/rnr_nothing', { headers: member.headers })).status).toBe(404);
    // An owner deletes any runner of the organization.
    expect((await stack.request('DELETE', `/v1/automation-runners/${theirs.runnerId}`, { headers: org.owner.headers })).status).toBe(204);
    expect((await ask(theirs.token)).status).toBe(401);
  });

  it('when the API key that minted it is revoked (not a token a session minted)', async () => {
    const member = await org.addMember('member');
    const byKey = await mint(member.headers);
    const bySession = await mint(bearer((await org.session(member.memberId)).token));
    expect((await ask(byKey.token)).status).toBe(200);
    await revokeApiKey(db(), await keyIdOf(member), new Date());
    expect(await ask(byKey.token)).toMatchObject({ status: 401, json: { ...revoked, message: 'The API key that minted it was revoked.' } });
    expect((await ask(bySession.token)).status).toBe(200);
  });

  it('when its member is removed', async () => {
    const member = await org.addMember('member');
    const { token } = await mint(member.headers);
    expect((await ask(token)).status).toBe(200);
    await removeMember(db(), member.memberId, new Date());
    expect(await ask(token)).toMatchObject({ status: 401, json: { ...revoked, message: 'Its member was removed from the organization.' } });
  });

  it('when it expires', async () => {
    const member = await org.addMember('member');
    const { token } = await mint(member.headers);
    expect((await ask(token)).status).toBe(200);
    const hash = createHash('sha256').update(token).digest('hex');
    await db()
      .updateTable('runner_tokens')
      .set({ expires_at: new Date(Date.now() - 1_000) })
      .where('token_hash', '=', hash)
      .execute();
    expect(await ask(token)).toMatchObject({ status: 401, json: { error: 'unauthorized', reason: 'runner_token_expired' } });
  });
});

it('refuses an unknown token 401 runner_token_unknown, from memory the second time, and never a valid one because of them', async () => {
  const member = await org.addMember('member');
  const { token } = await mint(member.headers);
  const unknown = `den_rt_${'A'.repeat(43)}`;
  const cached = async () =>
    (await stack.services.metrics.authFailures.get()).values.find((v) => v.labels.outcome === 'unknown_cached')?.value ?? 0;
  const before = await cached();
  for (let i = 0; i < 2; i++) {
    expect(await stack.request('GET', '/v1/automation-runs', { headers: bearer(unknown) })).toMatchObject({
      status: 401,
      json: { error: 'unauthorized', reason: 'runner_token_unknown' },
    });
  }
  expect(await cached()).toBe(before + 1);
  expect(await stack.request('GET', '/v1/automation-runs', { headers: bearer('den_rt_short') })).toMatchObject({
    status: 401,
    json: { reason: 'runner_token_unknown' },
  });

  // 400 forged tokens at once, with the valid token's requests among them.
  const forged = Array.from({ length: 400 }, (_, i) =>
    stack.request('GET', '/v1/automation-runs', { headers: bearer(`den_rt_${String(i).padStart(43, 'x')}`) }),
  );
  const valid = Array.from({ length: 20 }, () => stack.request('GET', '/v1/automation-runs', { headers: bearer(token) }));
  const [forgedAnswers, validAnswers] = await Promise.all([Promise.all(forged), Promise.all(valid)]);
  expect(new Set(forgedAnswers.map((res) => res.status))).toEqual(new Set([401]));
  expect(validAnswers.map((res) => res.status)).toEqual(validAnswers.map(() => 200));
}, 30_000);
