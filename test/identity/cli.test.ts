/** The real `den` binary against the real database. */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { DEN_LAUNCHER, denBin } from '../harness/den-bin';
import { startTestStack, type TestStack } from '../harness/stack';

const exec = promisify(execFile);
const DEN = denBin();

async function den(stack: TestStack, ...args: string[]) {
  try {
    // The binary runs under this Node; its whole environment is the test's config.
    const { stdout, stderr } = await exec(process.execPath, [DEN, ...args], {
      env: { DATABASE_URL: stack.config.database.url, DATA_DIR: stack.config.dataDir },
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr, json: parseJson(stdout) };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr, json: undefined };
  }
}

function parseJson(text: string) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

describe('den CLI', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack();
  });
  afterAll(() => stack.stop());

  it('bootstrap prints an owner and a key that works against an authenticated route', async () => {
    const out = await den(stack, 'bootstrap', '--org-name', 'Acme', '--email', `founder-${Date.now()}@acme.test`);
    expect(out.code).toBe(0);
    expect(out.json).toEqual({
      organizationId: expect.stringMatching(/^org_/),
      userId: expect.stringMatching(/^usr_/),
      memberId: expect.stringMatching(/^mem_/),
      role: 'owner',
      apiKey: expect.stringMatching(/^den_[A-Za-z0-9_-]{43}$/),
    });
    const me = await stack.request('GET', '/v1/me', { headers: { 'x-api-key': out.json.apiKey } });
    expect(me.status).toBe(200);
    expect(me.json).toMatchObject({ organizationId: out.json.organizationId, memberId: out.json.memberId, role: 'owner' });
  }, 60_000);

  it('members create/remove, api-keys create/revoke and sessions create work end to end', async () => {
    const boot = await den(stack, 'bootstrap', '--org-name', 'Beta', '--email', `b-${Date.now()}@beta.test`);
    const member = await den(
      stack,
      'members',
      'create',
      '--org',
      boot.json.organizationId,
      '--email',
      `m-${Date.now()}@beta.test`,
      '--role',
      'member',
    );
    expect(member.code).toBe(0);
    expect(member.json).toEqual({ userId: expect.stringMatching(/^usr_/), memberId: expect.stringMatching(/^mem_/), role: 'member' });

    const key = await den(stack, 'api-keys', 'create', '--member', member.json.memberId, '--name', 'ci', '--expires-in-days', '7');
    expect(key.code).toBe(0);
    expect(key.json).toEqual({ id: expect.stringMatching(/^key_/), apiKey: expect.stringMatching(/^den_/), expiresAt: expect.any(String) });
    const days = (Date.parse(key.json.expiresAt) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(6.9);
    expect(days).toBeLessThan(7.1);

    const session = await den(stack, 'sessions', 'create', '--member', member.json.memberId, '--expires-in-hours', '2');
    expect(session.code).toBe(0);
    const viaSession = await stack.request('GET', '/v1/me', { headers: { authorization: `Bearer ${session.json.token}` } });
    expect(viaSession.json).toMatchObject({ memberId: member.json.memberId, via: 'session' });

    const revoked = await den(stack, 'api-keys', 'revoke', key.json.id);
    expect(revoked.code).toBe(0);
    expect((await stack.request('GET', '/v1/me', { headers: { 'x-api-key': key.json.apiKey } })).status).toBe(401);

    const removed = await den(stack, 'members', 'remove', member.json.memberId);
    expect(removed.code).toBe(0);
    expect((await stack.request('GET', '/v1/me', { headers: { authorization: `Bearer ${session.json.token}` } })).status).toBe(401);
  }, 90_000);

  it('members list and api-keys list print the rows, and never key material', async () => {
    const stamp = Date.now();
    const boot = await den(stack, 'bootstrap', '--org-name', 'Gamma', '--email', `g-${stamp}@gamma.test`);
    const org = boot.json.organizationId as string;
    const admin = await den(stack, 'members', 'create', '--org', org, '--email', `a-${stamp}@gamma.test`, '--role', 'admin');
    const leaver = await den(stack, 'members', 'create', '--org', org, '--email', `l-${stamp}@gamma.test`, '--role', 'member');
    const ci = await den(stack, 'api-keys', 'create', '--member', admin.json.memberId, '--name', 'ci');
    const old = await den(stack, 'api-keys', 'create', '--member', admin.json.memberId, '--name', 'old');
    const leaverKey = await den(stack, 'api-keys', 'create', '--member', leaver.json.memberId, '--name', 'laptop');
    expect((await den(stack, 'api-keys', 'revoke', old.json.id)).code).toBe(0);
    expect((await den(stack, 'members', 'remove', leaver.json.memberId)).code).toBe(0);
    const rawKeys = [boot.json.apiKey, ci.json.apiKey, old.json.apiKey, leaverKey.json.apiKey] as string[];
    expect(rawKeys.every((key) => /^den_/.test(key))).toBe(true);

    const date = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/);
    const members = await den(stack, 'members', 'list', '--org', org);
    expect(members.code).toBe(0);
    expect(members.json).toEqual([
      {
        memberId: boot.json.memberId,
        userId: boot.json.userId,
        email: `g-${stamp}@gamma.test`,
        role: 'owner',
        createdAt: date,
        removedAt: null,
      },
      {
        memberId: admin.json.memberId,
        userId: admin.json.userId,
        email: `a-${stamp}@gamma.test`,
        role: 'admin',
        createdAt: date,
        removedAt: null,
      },
    ]);
    const withRemoved = await den(stack, 'members', 'list', '--org', org, '--include-removed');
    expect(withRemoved.json.map((m: { memberId: string; removedAt: string | null }) => [m.memberId, m.removedAt])).toEqual([
      [boot.json.memberId, null],
      [admin.json.memberId, null],
      [leaver.json.memberId, date],
    ]);

    const keys = await den(stack, 'api-keys', 'list', '--org', org);
    expect(keys.code).toBe(0);
    const key = (id: string, name: string, member: { memberId: string; email: string; role: string }, status: string) => ({
      id,
      name,
      organizationId: org,
      memberId: member.memberId,
      email: member.email,
      role: member.role,
      status,
      createdAt: date,
      expiresAt: date,
      lastUsedAt: null,
      revokedAt: status === 'revoked' ? date : null,
    });
    const ownerRow = { memberId: boot.json.memberId, email: `g-${stamp}@gamma.test`, role: 'owner' };
    const adminRow = { memberId: admin.json.memberId, email: `a-${stamp}@gamma.test`, role: 'admin' };
    const leaverRow = { memberId: leaver.json.memberId, email: `l-${stamp}@gamma.test`, role: 'member' };
    expect(keys.json).toEqual([
      key(expect.stringMatching(/^key_/), 'bootstrap', ownerRow, 'active'),
      key(ci.json.id, 'ci', adminRow, 'active'),
      key(old.json.id, 'old', adminRow, 'revoked'),
      key(leaverKey.json.id, 'laptop', leaverRow, 'member_removed'),
    ]);

    const ofAdmin = await den(stack, 'api-keys', 'list', '--member', admin.json.memberId);
    expect(ofAdmin.json.map((k: { id: string }) => k.id)).toEqual([ci.json.id, old.json.id]);
    const all = await den(stack, 'api-keys', 'list');
    expect(all.code).toBe(0);
    expect(all.json.map((k: { id: string }) => k.id)).toEqual(expect.arrayContaining([ci.json.id, old.json.id, leaverKey.json.id]));

    // No key, no hash (as stored: SHA-256 hex), no stored prefix, in any listing or on stderr.
    const sha256 = (raw: string) => createHash('sha256').update(raw, 'utf8').digest('hex');
    for (const out of [members, withRemoved, keys, ofAdmin, all]) {
      const text = out.stdout + out.stderr;
      for (const raw of rawKeys) {
        expect(text).not.toContain(raw);
        expect(text).not.toContain(sha256(raw));
        expect(text).not.toContain(raw.slice(0, 8));
      }
      expect(text).not.toMatch(/"[^"]*(hash|prefix|apiKey)[^"]*":/i);
      expect(text).not.toContain('"den_');
    }
  }, 120_000);

  it('errors are a clear message on stderr and a non-zero exit', async () => {
    const bad = await den(stack, 'members', 'create', '--org', 'org_nope', '--email', 'x@y.test', '--role', 'admin');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('organization org_nope not found');
    expect(bad.stdout).toBe('');

    const role = await den(stack, 'members', 'create', '--org', 'org_nope', '--email', 'x@y.test', '--role', 'king');
    expect(role.code).not.toBe(0);
    expect(role.stderr).toMatch(/must be one of owner, admin, member/);

    const noOrg = await den(stack, 'members', 'list', '--org', 'org_nope');
    expect(noOrg.code).not.toBe(0);
    expect(noOrg.stderr).toContain('organization org_nope not found');
    const noMember = await den(stack, 'api-keys', 'list', '--member', 'mem_nope');
    expect(noMember.code).not.toBe(0);
    expect(noMember.stderr).toContain('member mem_nope not found');

    const help = await den(stack, 'api-keys', 'create', '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--expires-in-days');
  }, 60_000);

  it('the development launcher (bin/den.js) runs the same CLI from the sources, as npx den does in a clone', async () => {
    const env = { DATABASE_URL: stack.config.database.url, DATA_DIR: stack.config.dataDir };
    const failure = await exec(process.execPath, [DEN_LAUNCHER, 'members', 'list', '--org', 'org_nope'], { env, timeout: 30_000 }).then(
      () => undefined,
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    expect(failure).toMatchObject({ code: 1, stdout: '' });
    expect(failure?.stderr).toContain('organization org_nope not found');
  }, 60_000);
});
