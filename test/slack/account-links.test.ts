/** POST /v1/integrations/slack/{connectionId}/account-links: every outcome the route can answer. */
import { randomBytes } from 'node:crypto';
import { createLinkToken } from '../../src/slack/link-token';
import { createTestOrg, type TestMember } from '../harness/identity';
import {
  createTestSlackConnection,
  linkCodeFrom,
  linkTokenFrom,
  newSlackUserId,
  postSlashCommand,
  type TestSlackConnection,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';

let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
let connection: TestSlackConnection;

beforeAll(async () => {
  stack = await startTestStack();
  org = await createTestOrg(stack.services.database.db);
  connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId);
});
afterAll(() => stack.stop());

const redeem = (member: Pick<TestMember, 'headers'> | { headers: Record<string, string> }, token: unknown, to = connection.connectionId) =>
  stack.request('POST', `/v1/integrations/slack/${to}/account-links`, { headers: member.headers, body: { token } });

/** A token the way a member gets one: from a real slash command. */
async function tokenFor(slackUserId: string, via: TestSlackConnection = connection): Promise<string> {
  const res = await postSlashCommand(stack, via, { user_id: slackUserId });
  expect(res.status).toBe(200);
  return linkTokenFrom(res.json.text);
}

describe('completing a connect link', () => {
  it('201 {slackUserId, memberId}: the Slack user is linked to the calling member', async () => {
    const member = await org.addMember('member');
    const slackUserId = newSlackUserId();
    const res = await redeem(member, await tokenFor(slackUserId));
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ connectionId: connection.connectionId, slackUserId, memberId: member.memberId });
    const row = await stack.services.database.db
      .selectFrom('slack_account_links')
      .selectAll()
      .where('connection_id', '=', connection.connectionId)
      .where('slack_user_id', '=', slackUserId)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ member_id: member.memberId, organization_id: org.organizationId });
  });

  it('works with a session too', async () => {
    const member = await org.addMember('member');
    const session = await org.session(member.memberId);
    const res = await redeem({ headers: { authorization: `Bearer ${session.token}` } }, await tokenFor(newSlackUserId()));
    expect(res.status).toBe(201);
    expect(res.json.memberId).toBe(member.memberId);
  });

  it('404 {error:"link_not_found"} for a well-formed token this service never signed; 400 for one that is no token', async () => {
    const genuine = await tokenFor(newSlackUserId());
    const forged = createLinkToken(randomBytes(32), {
      connectionId: connection.connectionId,
      teamId: connection.teamId,
      slackUserId: newSlackUserId(),
      now: Date.now(),
      ttlMs: 600_000,
    }).token;
    const [claims, mac] = genuine.split('.') as [string, string];
    const swapped = `${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(claims, 'base64url').toString()), u: 'UOTHER' })).toString('base64url')}.${mac}`;
    for (const token of [forged, swapped]) {
      const res = await redeem(org.owner, token);
      expect(res.status).toBe(404);
      expect(res.json).toEqual({ error: 'link_not_found' });
    }
    for (const token of ['not-a-token', '', `${genuine}x`]) {
      const res = await redeem(org.owner, token);
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({ error: 'invalid_request' });
    }
  });

  it('400 {error:"invalid_link"} for a genuine token of another connection', async () => {
    const other = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId);
    const res = await redeem(org.owner, await tokenFor(newSlackUserId(), other));
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'invalid_link' });
  });

  it('410 {error:"link_expired"} for an expired token', async () => {
    const { token } = createLinkToken(stack.services.secretKey, {
      connectionId: connection.connectionId,
      teamId: connection.teamId,
      slackUserId: newSlackUserId(),
      now: Date.now() - 600_001,
      ttlMs: 600_000,
    });
    const res = await redeem(org.owner, token);
    expect(res.status).toBe(410);
    expect(res.json).toEqual({ error: 'link_expired' });
  });

  it('409 {error:"link_used"} for a token that was already redeemed, even by the same member', async () => {
    const member = await org.addMember('member');
    const token = await tokenFor(newSlackUserId());
    expect((await redeem(member, token)).status).toBe(201);
    const again = await redeem(member, token);
    expect(again.status).toBe(409);
    expect(again.json).toEqual({ error: 'link_used' });
  });

  it('one token redeemed concurrently: exactly one 201', async () => {
    const [a, b] = [await org.addMember('member'), await org.addMember('member')];
    const token = await tokenFor(newSlackUserId());
    const results = await Promise.all([redeem(a, token), redeem(b, token), redeem(a, token)]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409]);
    expect(results.filter((r) => r.status === 409).map((r) => r.json)).toEqual([{ error: 'link_used' }, { error: 'link_used' }]);
  });

  // Another organization's connection answers exactly as one that does not exist, so ids cannot be probed.
  it('404 for a connection of another organization, with the same body as for a missing one', async () => {
    const otherOrg = await createTestOrg(stack.services.database.db);
    const token = await tokenFor(newSlackUserId());
    const other = await redeem(otherOrg.owner, token);
    const missing = await redeem(otherOrg.owner, token, 'emc_01h2xcejqtf2nbrexx3vqjhp41');
    expect(other.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(other.text).toBe(missing.text);
    expect(other.json).toEqual({ error: 'not_found', message: expect.any(String) });
    // Nothing was spent: the token still links a member of the connection's own organization.
    expect((await redeem(await org.addMember('member'), token)).status).toBe(201);
  });

  it('409 {error:"already_linked"} when the Slack user is linked to a different member; the token stays unspent', async () => {
    const [first, second] = [await org.addMember('member'), await org.addMember('member')];
    const slackUserId = newSlackUserId();
    expect((await redeem(first, await tokenFor(slackUserId))).status).toBe(201);
    const token = await tokenFor(slackUserId);
    const res = await redeem(second, token);
    expect(res.status).toBe(409);
    expect(res.json).toEqual({ error: 'already_linked' });
    // The same member linking again is fine (idempotent), and this token was not spent above.
    const same = await redeem(first, token);
    expect(same.status).toBe(201);
    expect(same.json).toEqual({ connectionId: connection.connectionId, slackUserId, memberId: first.memberId });
  });

  it('401 without credentials, 404 for an unknown connection, 400 for a body with neither a token nor a code, or both', async () => {
    const anonymous = await stack.request('POST', `/v1/integrations/slack/${connection.connectionId}/account-links`, {
      body: { token: 'x' },
    });
    expect(anonymous.status).toBe(401);
    expect(anonymous.json).toEqual({ error: 'unauthorized' });
    const unknown = await redeem(org.owner, await tokenFor(newSlackUserId()), 'emc_01h2xcejqtf2nbrexx3vqjhp41');
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toBe('not_found');
    const noToken = await stack.request('POST', `/v1/integrations/slack/${connection.connectionId}/account-links`, {
      headers: org.owner.headers,
      body: {},
    });
    expect(noToken.status).toBe(400);
    expect(noToken.json.error).toBe('invalid_request');
    expect(noToken.json.details.length).toBeGreaterThan(0);
    const both = await stack.request('POST', `/v1/integrations/slack/${connection.connectionId}/account-links`, {
      headers: org.owner.headers,
      body: { token: 'x', code: 'ABCDE-FGHJK' },
    });
    expect(both.status).toBe(400);
  });
});

describe('a link code', () => {
  const byCode = (member: Pick<TestMember, 'headers'>, code: string, to?: string) =>
    stack.request('POST', to ? `/v1/integrations/slack/${to}/account-links` : '/v1/integrations/slack/account-links', {
      headers: member.headers,
      body: { code },
    });

  it("stands for the same claims as the reply's token: one of the two links, and the other is spent with it", async () => {
    const member = await org.addMember('member');
    const slackUserId = newSlackUserId();
    const reply = await postSlashCommand(stack, connection, { user_id: slackUserId });
    const [code, token] = [linkCodeFrom(reply.json.text), linkTokenFrom(reply.json.text)];
    const linked = await byCode(member, code.replace('-', ' ').toLowerCase(), connection.connectionId);
    expect(linked.json).toEqual({ connectionId: connection.connectionId, slackUserId, memberId: member.memberId });
    expect((await redeem(member, token)).json).toEqual({ error: 'link_used' });
    expect((await byCode(member, code)).json).toEqual({ error: 'link_used' });
    // Only an HMAC of the code is stored.
    const rows = await stack.services.database.db.selectFrom('slack_link_codes').select('code_hash').execute();
    expect(rows.map((r) => r.code_hash)).not.toContain(code.replace('-', ''));
  });

  it("names its connection: another connection's path, an unknown or an expired code are refused", async () => {
    const other = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId);
    const code = linkCodeFrom((await postSlashCommand(stack, connection, { user_id: newSlackUserId() })).json.text);
    expect((await byCode(org.owner, code, other.connectionId)).json).toEqual({ error: 'invalid_link' });
    const unknown = await byCode(org.owner, 'ZZZZZ-ZZZZZ');
    expect([unknown.status, unknown.json]).toEqual([404, { error: 'link_not_found' }]);
    const malformed = await byCode(org.owner, 'ZZZZZ-ZZZZ');
    expect([malformed.status, malformed.json.error]).toEqual([400, 'invalid_request']);
    await stack.services.database.db
      .updateTable('slack_link_codes')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .execute();
    expect(await byCode(org.owner, code)).toMatchObject({ status: 410, json: { error: 'link_expired' } });
  });
});
