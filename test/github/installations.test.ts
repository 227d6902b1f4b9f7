/**
 * Installations belong to organizations, end to end over real HTTP: the App's install flow (the
 * install link, GitHub's install page on the fake, the Callback URL with the installer's code),
 * the refusals of a spoofed installation id and of every bad state, the target routes' ownership
 * and repository checks, the sync's first check of an unverified target, and the owner as a
 * delivery's tenant. The fake GitHub checks the client secret, the code, the redirect and every
 * token as GitHub does; no token it issued may reach the service's logs.
 */
import { randomUUID } from 'node:crypto';
import { FLOW_PAGE_POLICY, FLOW_STATE_REFUSALS, issueFlowState } from '../../src/app/install-flow';
import { githubDeliveryWorkflowId } from '../../src/github/contract';
import { bindInstallation, installationOwner } from '../../src/github/installations';
import { createInstallerClient } from '../../src/github/oauth';
import { exchangeWebFlowCode } from '@octokit/oauth-methods';
import { request as octokitRequest } from '@octokit/request';
import { startFakeGithub, type FakeGithub } from '../harness/fake-github';
import { deliver, deliveryResult, freshId, githubExample, ownedTarget } from '../harness/github';
import { fakeGithubEnv } from '../harness/github-sync';
import { createTestOrg, type TestMember } from '../harness/identity';
import { startTestStack, type TestResponse, type TestStack } from '../harness/stack';
import { startTcpProxy } from '../harness/tcp-proxy';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
let fake: FakeGithub;
let stack: TestStack;
/** Added to the routes' clock: the expired-state test moves it past the state's ten minutes. */
let clockOffsetMs = 0;

beforeAll(async () => {
  fake = await startFakeGithub();
  stack = await startTestStack({
    worker: true,
    now: () => Date.now() + clockOffsetMs,
    env: { ...fakeGithubEnv(fake, SECRET), ...installEnv(fake) },
  });
  fake.callbackUrl = `${stack.url}/v1/connectors/github/setup`;
});
afterAll(async () => {
  await stack?.stop();
  await fake?.close();
});

function installEnv(github: FakeGithub): Record<string, string> {
  return { GITHUB_APP_SLUG: github.slug, GITHUB_CLIENT_ID: github.clientId, GITHUB_CLIENT_SECRET: github.clientSecret };
}

const db = () => stack.services.database.db;
const newOrg = () => createTestOrg(db());

/** A GitHub user of the fake, signed in to it in the "browser" of the tests. */
function githubUser(): string {
  const login = `user-${randomUUID().slice(0, 8)}`;
  fake.addUser(login);
  return login;
}

async function installLink(member: TestMember): Promise<string> {
  const res = await stack.request('POST', '/v1/connectors/github/installations/install-url', { headers: member.headers });
  expect(res.status).toBe(200);
  return res.json.url as string;
}

/** Opens the install link as `login` on the fake GitHub: it installs the App and redirects to the Callback URL. */
async function installAs(link: string, login: string): Promise<URL> {
  const res = await fetch(link, { redirect: 'manual', headers: { cookie: `fake_github_user=${login}` } });
  expect(res.status).toBe(302);
  return new URL(res.headers.get('location')!);
}

/** The Callback URL as GitHub sends the installer's browser there. */
const callback = (location: URL) => stack.request('GET', `${location.pathname}${location.search}`);

const stateOf = (link: string) => new URL(link).searchParams.get('state')!;

function setupUrl(params: Record<string, string>): URL {
  return new URL(`/v1/connectors/github/setup?${new URLSearchParams(params).toString()}`, stack.url);
}

function expectPage(res: TestResponse, status: number, reason?: string): void {
  expect({ status: res.status, type: res.headers.get('content-type') }).toEqual({ status, type: 'text/html; charset=utf-8' });
  expect(res.headers.get('content-security-policy')).toBe(FLOW_PAGE_POLICY);
  expect(res.headers.get('cache-control')).toBe('no-store');
  expect(res.text).toMatch(/^<!doctype html>/);
  expect(res.text).not.toMatch(/<script/i);
  if (reason !== undefined) expect(res.text).toContain(`<dd>${reason}</dd>`);
}

/** The organization binds a new installation of its own through the whole flow; returns its id. */
async function bindThroughFlow(member: TestMember, login: string): Promise<number> {
  const location = await installAs(await installLink(member), login);
  const res = await callback(location);
  expectPage(res, 200);
  expect(res.text).toContain('The GitHub App is connected');
  return Number(location.searchParams.get('installation_id'));
}

const oauthExchanges = () => fake.calls.filter((c) => c.kind === 'oauth_token').length;

describe('the install flow', () => {
  it('B binds its installation (install link → GitHub → Callback URL), lists it and connects its repository', async () => {
    const b = await newOrg();
    const login = githubUser();
    const link = await installLink(b.owner);
    expect(link.startsWith(`${fake.url}/apps/${fake.slug}/installations/new?state=`)).toBe(true);

    const location = await installAs(link, login);
    expect(location.searchParams.get('setup_action')).toBe('install');
    expect(location.searchParams.get('state')).toBe(stateOf(link));
    const installationId = Number(location.searchParams.get('installation_id'));
    const res = await callback(location);
    expectPage(res, 200);
    expect(res.text).toContain(`<dd>${installationId}</dd>`);
    expect(res.text).toContain(`<dd>${login}</dd>`);
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(await installationOwner(db(), installationId)).toBe(b.organizationId);

    const listed = await stack.request('GET', '/v1/connectors/github/installations', { headers: b.owner.headers });
    expect(listed.status).toBe(200);
    expect(listed.json.installations).toEqual([
      { installationId, account: login, boundVia: 'install_flow', boundAt: expect.any(String), targets: 0 },
    ]);

    const repository = `${login}/plugins`;
    fake.commit(repository, installationId, 'master', { '.mcp.json': '{"mcpServers":{}}' });
    const created = await stack.request('POST', '/v1/connectors/github/targets', {
      headers: b.owner.headers,
      body: { installationId, repository },
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ installationId, repository, status: 'active', repositoryVerified: true });
    const repoCheck = fake.calls.filter((c) => c.kind === 'repo' && c.repository === repository.toLowerCase());
    expect(repoCheck.map((c) => [c.auth, c.status])).toEqual([['token', 200]]);
  });

  it("A can neither connect B's installation (404, like a missing one), bind it with a spoofed installation_id, nor see its sync events", async () => {
    const [a, b] = [await newOrg(), await newOrg()];
    const [loginA, loginB] = [githubUser(), githubUser()];
    const installationB = await bindThroughFlow(b.owner, loginB);
    const repository = `${loginB}/secret-repo`;
    fake.commit(repository, installationB, 'master', { '.mcp.json': '{"mcpServers":{}}' });
    const target = await stack.request('POST', '/v1/connectors/github/targets', {
      headers: b.owner.headers,
      body: { installationId: installationB, repository, ref: 'master' },
    });
    expect(target.status).toBe(201);

    const theirs = await stack.request('POST', '/v1/connectors/github/targets', {
      headers: a.owner.headers,
      body: { installationId: installationB, repository },
    });
    const missing = await stack.request('POST', '/v1/connectors/github/targets', {
      headers: a.owner.headers,
      body: { installationId: freshId(), repository },
    });
    expect(theirs.status).toBe(404);
    expect(theirs.json).toEqual({ error: 'not_found', message: 'No such installation in this organization.' });
    expect({ status: missing.status, body: missing.json }).toEqual({ status: theirs.status, body: theirs.json });
    // GitHub was never asked about a repository on an installation the caller does not own.
    expect(fake.calls.filter((c) => c.kind === 'repo' && c.repository === repository.toLowerCase())).toHaveLength(1);

    // A's own valid state and A's own installer, with B's installation id put on the callback.
    const location = await installAs(await installLink(a.owner), loginA);
    const installationA = Number(location.searchParams.get('installation_id'));
    location.searchParams.set('installation_id', String(installationB));
    const spoofed = await callback(location);
    expectPage(spoofed, 403, 'installation_not_visible');
    expect(spoofed.text).toContain(`<dd>${installationB}</dd>`);
    expect(await installationOwner(db(), installationB)).toBe(b.organizationId);
    expect(await installationOwner(db(), installationA)).toBeUndefined();
    expect((await stack.request('GET', '/v1/connectors/github/installations', { headers: a.owner.headers })).json).toEqual({
      installations: [],
    });

    // B's pushes are B's sync work only; A's listing never shows them.
    const payload = githubExample('push', (p) => p.ref === 'refs/heads/master' && p.installation);
    payload.installation.id = installationB;
    payload.repository.id = fake.repositoryId(repository);
    payload.repository.full_name = repository;
    const deliveryId = randomUUID();
    expect((await deliver(stack, { event: 'push', deliveryId, payload, secret: SECRET })).status).toBe(202);
    await deliveryResult(stack, deliveryId);
    const eventsOf = async (member: TestMember) =>
      (await stack.request('GET', '/v1/connectors/github/sync-events?limit=200', { headers: member.headers })).json.events as {
        deliveryId: string;
      }[];
    expect((await eventsOf(b.owner)).map((e) => e.deliveryId)).toContain(deliveryId);
    expect(await eventsOf(a.owner)).toEqual([]);
  });

  it("refuses to move an installation another organization owns, even when A's installer can see it", async () => {
    const [a, b] = [await newOrg(), await newOrg()];
    const [loginA, loginB] = [githubUser(), githubUser()];
    // An installation on a GitHub organization both installers belong to, bound to B.
    const shared = fake.addInstallation(`gh-org-${randomUUID().slice(0, 6)}`, [loginA, loginB]);
    await bindInstallation(db(), { installationId: shared, organizationId: b.organizationId, via: 'operator' });

    const link = await installLink(a.owner);
    const res = await callback(
      setupUrl({ code: fake.issueCode(loginA), installation_id: String(shared), setup_action: 'install', state: stateOf(link) }),
    );
    expectPage(res, 409, 'owned_elsewhere');
    expect(res.text).not.toContain(b.organizationId);
    expect(await installationOwner(db(), shared)).toBe(b.organizationId);

    // B completing the flow for its own installation again is told it already was.
    const again = await callback(
      setupUrl({
        code: fake.issueCode(loginB),
        installation_id: String(shared),
        setup_action: 'install',
        state: stateOf(await installLink(b.owner)),
      }),
    );
    expectPage(again, 200);
    expect(again.text).toContain('It already was.');
  });

  it('a code GitHub refuses (used, or unknown) is a 400 page; GitHub failing is a 502 page', async () => {
    const org = await newOrg();
    const login = githubUser();
    const location = await installAs(await installLink(org.owner), login);
    const code = location.searchParams.get('code')!;
    expectPage(await callback(location), 200);

    const reused = setupUrl({ code, installation_id: location.searchParams.get('installation_id')!, setup_action: 'install' });
    reused.searchParams.set('state', stateOf(await installLink(org.owner)));
    const refused = await callback(reused);
    expectPage(refused, 400, 'authorization_refused');
    expect(refused.text).toContain('bad_verification_code');

    const other = fake.addInstallation(login, [login]);
    fake.fail((c) => c.kind === 'user_installations', 500);
    const down = await callback(
      setupUrl({
        code: fake.issueCode(login),
        installation_id: String(other),
        setup_action: 'install',
        state: stateOf(await installLink(org.owner)),
      }),
    );
    expectPage(down, 502, 'github_unavailable');
    expect(await installationOwner(db(), other)).toBeUndefined();
  });

  it('finds the installation on a later page of the installer’s installations', async () => {
    const org = await newOrg();
    const login = githubUser();
    for (let i = 0; i < 120; i++) fake.addInstallation(`bulk-${i}`, [login]);
    const wanted = fake.addInstallation(login, [login]);
    const before = fake.calls.filter((c) => c.kind === 'user_installations').length;
    const res = await callback(
      setupUrl({
        code: fake.issueCode(login),
        installation_id: String(wanted),
        setup_action: 'install',
        state: stateOf(await installLink(org.owner)),
      }),
    );
    expectPage(res, 200);
    // 121 installations at 100 a page: the second page has it.
    expect(fake.calls.filter((c) => c.kind === 'user_installations').length - before).toBe(2);
    expect(await installationOwner(db(), wanted)).toBe(org.organizationId);
  });

  it('an admin who lost the role cannot complete a link they were given (403 page)', async () => {
    const org = await newOrg();
    const admin = await org.addMember('admin');
    const link = await installLink(admin);
    await db().updateTable('members').set({ role: 'member' }).where('id', '=', admin.memberId).execute();
    const login = githubUser();
    const res = await callback(await installAs(link, login));
    expectPage(res, 403, 'not_admin');
  });
});

describe('states the setup route refuses, each with a clear page and nothing bound', () => {
  async function refusedWith(state: string, reason: string, sentence: string): Promise<void> {
    const login = githubUser();
    const installationId = fake.addInstallation(login, [login]);
    const exchangesBefore = oauthExchanges();
    const res = await callback(
      setupUrl({ code: fake.issueCode(login), installation_id: String(installationId), setup_action: 'install', state }),
    );
    expectPage(res, 400, `state_${reason}`);
    expect(res.text).toContain(sentence);
    // Refused before GitHub was asked: the code was never exchanged.
    expect(oauthExchanges()).toBe(exchangesBefore);
    expect(await installationOwner(db(), installationId)).toBeUndefined();
  }

  it('reused: a state completes one installation only', async () => {
    const org = await newOrg();
    const login = githubUser();
    const location = await installAs(await installLink(org.owner), login);
    expectPage(await callback(location), 200);
    await refusedWith(location.searchParams.get('state')!, 'reused', FLOW_STATE_REFUSALS.reused);
  });

  it('reused, concurrently: of two callbacks with one state exactly one binds', async () => {
    const org = await newOrg();
    const login = githubUser();
    const state = stateOf(await installLink(org.owner));
    const ids = [fake.addInstallation(login, [login]), fake.addInstallation(login, [login])];
    const answers = await Promise.all(
      ids.map((id) => callback(setupUrl({ code: fake.issueCode(login), installation_id: String(id), setup_action: 'install', state }))),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 400]);
    const owners = await Promise.all(ids.map((id) => installationOwner(db(), id)));
    expect(owners.filter((o) => o === org.organizationId)).toHaveLength(1);
  });

  it('expired: ten minutes after the link was made', async () => {
    const org = await newOrg();
    const link = await installLink(org.owner);
    clockOffsetMs = 10 * 60_000 + 1_000;
    try {
      await refusedWith(stateOf(link), 'expired', FLOW_STATE_REFUSALS.expired);
    } finally {
      clockOffsetMs = 0;
    }
  });

  it('tampered: another organization written into the claims, or one character changed', async () => {
    const [org, other] = [await newOrg(), await newOrg()];
    const state = stateOf(await installLink(org.owner));
    const [claims, mac] = state.split('.') as [string, string];
    const decoded = JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...decoded, o: other.organizationId }), 'utf8').toString('base64url');
    await refusedWith(`${forged}.${mac}`, 'bad_signature', FLOW_STATE_REFUSALS.bad_signature);
    const flipped = `${claims}.${mac[0] === 'A' ? 'B' : 'A'}${mac.slice(1)}`;
    await refusedWith(flipped, 'bad_signature', FLOW_STATE_REFUSALS.bad_signature);
    await refusedWith('not-a-state', 'malformed', FLOW_STATE_REFUSALS.malformed);
  });

  it("other purpose: a Slack install's state is not a GitHub install's", async () => {
    const org = await newOrg();
    const { state } = await issueFlowState(
      { db: db(), secretKey: stack.services.secretKey, now: Date.now },
      {
        purpose: 'slack_install',
        organizationId: org.organizationId,
        memberId: org.owner.memberId,
        subject: 'emc_01h2xcejqtf2nbrexx3vqjhp41',
        ttlMs: 60_000,
      },
    );
    await refusedWith(state, 'wrong_purpose', FLOW_STATE_REFUSALS.wrong_purpose);
  });
});

describe('what the setup route does with bad input: a 4xx page, never input echoed, never 5xx', () => {
  it('missing or malformed parameters, repeated names and markup are each a 400 page', async () => {
    const hostile = '<script>alert(1)</script>"><img src=x onerror=alert(2)>';
    const queries = [
      '',
      '?setup_action=install',
      `?setup_action=${encodeURIComponent(hostile)}&state=x&code=y&installation_id=1`,
      `?setup_action=install&state=${encodeURIComponent(hostile)}&code=${encodeURIComponent(hostile)}&installation_id=1`,
      `?setup_action=install&state=abc&code=abc&installation_id=${encodeURIComponent(hostile)}`,
      '?setup_action=install&state=abc&code=abc&installation_id=99999999999999999999',
      '?setup_action=install&setup_action=install&state=a&state=b&code=c&installation_id=1',
      '?setup_action=install&state=abc&installation_id=1',
    ];
    for (const query of queries) {
      const res = await stack.request('GET', `/v1/connectors/github/setup${query}`);
      expect({ query, status: res.status }).toEqual({ query, status: 400 });
      expectPage(res, 400);
      expect(res.text).not.toContain('<img');
      expect(res.text).not.toContain('alert(');
    }
  });

  it('setup_action=request answers that an owner must approve, binding nothing', async () => {
    const res = await stack.request('GET', '/v1/connectors/github/setup?setup_action=request&code=abc');
    expectPage(res, 200);
    expect(res.text).toContain('Installation requested');
  });
});

describe('the install-url and installations routes', () => {
  it('are for admins: 401 without credentials, 403 for a member', async () => {
    const org = await newOrg();
    const member = await org.addMember('member');
    for (const [method, path] of [
      ['POST', '/v1/connectors/github/installations/install-url'],
      ['GET', '/v1/connectors/github/installations'],
    ] as const) {
      expect((await stack.request(method, path)).json).toEqual({ error: 'unauthorized' });
      const forbidden = await stack.request(method, path, { headers: member.headers });
      expect(forbidden.status).toBe(403);
      expect(forbidden.json).toMatchObject({ error: 'forbidden', reason: 'admin_required' });
    }
  });

  it('are in the OpenAPI document with their statuses; the setup route answers text/html', async () => {
    const doc = (await stack.request('GET', '/openapi.json')).json;
    const statuses = (path: string, method: string) => Object.keys(doc.paths[path][method].responses).sort();
    expect(statuses('/v1/connectors/github/installations/install-url', 'post')).toEqual(['200', '401', '403', '409', '429', '503']);
    expect(statuses('/v1/connectors/github/installations', 'get')).toEqual(['200', '401', '403', '429', '503']);
    expect(statuses('/v1/connectors/github/setup', 'get')).toEqual(['200', '400', '403', '409', '502', '503']);
    for (const status of ['200', '400', '403', '409', '502', '503']) {
      expect(Object.keys(doc.paths['/v1/connectors/github/setup'].get.responses[status].content)).toEqual(['text/html']);
    }
    expect(doc.paths['/v1/connectors/github/setup'].get.security).toEqual([]);
    expect(statuses('/v1/connectors/github/targets', 'post')).toEqual(expect.arrayContaining(['404', '422', '502']));
  });
});

describe('targets and ownership', () => {
  it('422 repository_not_accessible when the installation cannot read the repository; 502 when GitHub fails the check', async () => {
    const org = await newOrg();
    const installationId = await bindThroughFlow(org.owner, githubUser());
    const elsewhere = `someone-${freshId()}/private`;
    fake.commit(elsewhere, freshId(), 'master', {});
    for (const repository of [elsewhere, `nobody-${freshId()}/nothing`]) {
      const res = await stack.request('POST', '/v1/connectors/github/targets', {
        headers: org.owner.headers,
        body: { installationId, repository },
      });
      expect(res.status).toBe(422);
      expect(res.json).toMatchObject({ error: 'repository_not_accessible' });
    }
    const mine = `mine-${freshId()}/plugins`;
    fake.commit(mine, installationId, 'master', {});
    fake.fail((c) => c.kind === 'repo' && c.repository === mine, 503);
    const down = await stack.request('POST', '/v1/connectors/github/targets', {
      headers: org.owner.headers,
      body: { installationId, repository: mine },
    });
    expect(down.status).toBe(502);
    expect(down.json).toMatchObject({ error: 'github_unavailable' });
    const listed = await stack.request('GET', '/v1/connectors/github/targets', { headers: org.owner.headers });
    expect(listed.json.targets).toEqual([]);
  });

  it('a target recorded unverified is checked at its first sync: not accessible → disabled `not_accessible`', async () => {
    const org = await newOrg();
    const installationId = freshId();
    const repository = `octo-${freshId()}/hidden`;
    // The repository exists on GitHub, but on another installation.
    fake.install(installationId);
    fake.commit(repository, freshId(), 'master', { '.mcp.json': '{}' });
    const targetId = await ownedTarget(db(), {
      organizationId: org.organizationId,
      installationId,
      repositoryFullName: repository,
      ref: 'master',
    });
    const forced = await stack.request('POST', `/v1/connectors/github/targets/${targetId}/sync`, { headers: org.owner.headers });
    expect(forced.status).toBe(202);
    const shown = await waitFor(
      async () => {
        const res = await stack.request('GET', `/v1/connectors/github/targets/${targetId}`, { headers: org.owner.headers });
        return res.json.status === 'disabled' && res.json;
      },
      20_000,
      { what: 'the target to be disabled' },
    );
    expect(shown).toMatchObject({
      status: 'disabled',
      statusReason: 'not_accessible',
      repositoryVerified: false,
      lastSync: { status: 'failed', error: { code: 'repository_not_accessible' } },
    });
    expect(fake.calls.filter((c) => c.repository === repository.toLowerCase()).map((c) => c.kind)).toEqual(['repo']);
  });

  it('…and a readable one is verified by that check, then synced', async () => {
    const org = await newOrg();
    const installationId = freshId();
    const repository = `octo-${freshId()}/visible`;
    fake.commit(repository, installationId, 'master', { '.mcp.json': '{"mcpServers":{}}' });
    const targetId = await ownedTarget(db(), {
      organizationId: org.organizationId,
      installationId,
      repositoryFullName: repository,
      ref: 'master',
    });
    expect((await stack.request('POST', `/v1/connectors/github/targets/${targetId}/sync`, { headers: org.owner.headers })).status).toBe(
      202,
    );
    const shown = await waitFor(
      async () => {
        const res = await stack.request('GET', `/v1/connectors/github/targets/${targetId}`, { headers: org.owner.headers });
        return res.json.lastSync?.status === 'completed' && res.json;
      },
      20_000,
      { what: 'the first sync' },
    );
    expect(shown).toMatchObject({ status: 'active', repositoryVerified: true });
    expect(fake.calls.filter((c) => c.repository === repository.toLowerCase()).map((c) => c.kind)[0]).toBe('repo');
  });

  it("a delivery's tenant (its fairness key) is the installation's owner, even before any target", async () => {
    const org = await newOrg();
    const installationId = await bindThroughFlow(org.owner, githubUser());
    // A push, or a repository change, that touches no target is not accepted; the installation's own lifecycle deliveries are.
    const payload = githubExample('installation', (p) => p.action === 'unsuspend');
    payload.installation.id = installationId;
    const deliveryId = randomUUID();
    expect((await deliver(stack, { event: 'installation', deliveryId, payload, secret: SECRET })).status).toBe(202);
    const description = await stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId)).describe();
    expect(description.raw.workflowExecutionInfo?.priority?.fairnessKey).toBe(org.organizationId);

    const unbound = freshId();
    const other = githubExample('installation', (p) => p.action === 'suspend');
    other.installation.id = unbound;
    const otherId = randomUUID();
    expect((await deliver(stack, { event: 'installation', deliveryId: otherId, payload: other, secret: SECRET })).status).toBe(202);
    const otherDescription = await stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(otherId)).describe();
    expect(otherDescription.raw.workflowExecutionInfo?.priority?.fairnessKey).toBe(`github-installation:${unbound}`);
  });

  it('installation.deleted removes the binding: the organization lists it no more', async () => {
    const org = await newOrg();
    const installationId = await bindThroughFlow(org.owner, githubUser());
    const payload = githubExample('installation', (p) => p.action === 'deleted');
    payload.installation.id = installationId;
    const deliveryId = randomUUID();
    expect((await deliver(stack, { event: 'installation', deliveryId, payload, secret: SECRET })).status).toBe(202);
    await deliveryResult(stack, deliveryId);
    expect(await installationOwner(db(), installationId)).toBeUndefined();
    const listed = await stack.request('GET', '/v1/connectors/github/installations', { headers: org.owner.headers });
    expect(listed.json).toEqual({ installations: [] });
  });
});

describe('the fake GitHub refuses what GitHub refuses', () => {
  const settings = () => ({ apiBaseUrl: fake.url, clientId: fake.clientId, clientSecret: fake.clientSecret });

  it('a wrong client secret or client id, a used or unknown code: the OAuth error, and no token', async () => {
    const login = githubUser();
    const installationId = fake.addInstallation(login, [login]);
    const issued = fake.issuedTokens.length;
    const wrongSecret = createInstallerClient({ ...settings(), clientSecret: 'f'.repeat(40) });
    const wrongId = createInstallerClient({ ...settings(), clientId: 'Iv23liwrong' });
    expect(await wrongSecret.checkInstaller(fake.issueCode(login), installationId)).toMatchObject({
      ok: false,
      failure: 'refused',
      code: 'incorrect_client_credentials',
    });
    expect(await wrongId.checkInstaller(fake.issueCode(login), installationId)).toMatchObject({ code: 'incorrect_client_credentials' });
    const right = createInstallerClient(settings());
    const code = fake.issueCode(login);
    expect(await right.checkInstaller(code, installationId)).toEqual({ ok: true, visible: true, account: login });
    expect(await right.checkInstaller(code, installationId)).toMatchObject({
      ok: false,
      failure: 'refused',
      code: 'bad_verification_code',
    });
    expect(await right.checkInstaller('0'.repeat(20), installationId)).toMatchObject({ code: 'bad_verification_code' });
    // Only the one good exchange issued a token (and its refresh token).
    expect(fake.issuedTokens.length - issued).toBe(2);
  });

  it('a redirect URI other than the Callback URL; GET /user/installations without a user token', async () => {
    const login = githubUser();
    await expect(
      exchangeWebFlowCode({
        clientType: 'github-app',
        clientId: fake.clientId,
        clientSecret: fake.clientSecret,
        code: fake.issueCode(login),
        redirectUrl: 'https://attacker.example/callback',
        request: octokitRequest.defaults({ baseUrl: fake.url }),
      }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining('redirect_uri_mismatch') });
    const none = await fetch(`${fake.url}/user/installations`);
    expect(none.status).toBe(401);
    const forged = await fetch(`${fake.url}/user/installations`, { headers: { authorization: 'token ghu_forged' } });
    expect(forged.status).toBe(401);
  });
});

describe('without the install settings', () => {
  let bare: TestStack;
  beforeAll(async () => {
    bare = await startTestStack({ env: { GITHUB_WEBHOOK_SECRET: SECRET } });
  });
  afterAll(() => bare?.stop());

  it('the install routes answer 409 not_configured; an operator binding still lets targets be connected', async () => {
    const org = await createTestOrg(bare.services.database.db);
    const url = await bare.request('POST', '/v1/connectors/github/installations/install-url', { headers: org.owner.headers });
    expect(url.status).toBe(409);
    expect(url.json).toMatchObject({ error: 'not_configured' });
    const page = await bare.request('GET', '/v1/connectors/github/setup?code=a&installation_id=1&setup_action=install&state=b');
    expectPage(page, 409, 'not_configured');

    const installationId = freshId();
    await bindInstallation(bare.services.database.db, { installationId, organizationId: org.organizationId, via: 'operator' });
    const created = await bare.request('POST', '/v1/connectors/github/targets', {
      headers: org.owner.headers,
      body: { installationId, repository: 'acme/widgets' },
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ repositoryVerified: false, sync: 'not_configured' });
  });
});

describe('while Postgres is unreachable', () => {
  it('the setup route answers a 503 page with Retry-After, not an error', async () => {
    const url = new URL(stack.config.database.url!);
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    url.port = String(proxy.port);
    const cut = await startTestStack({ env: { ...fakeGithubEnv(fake, SECRET), ...installEnv(fake), DATABASE_URL: url.toString() } });
    try {
      const org = await newOrg();
      const link = await cut.request('POST', '/v1/connectors/github/installations/install-url', { headers: org.owner.headers });
      expect(link.status).toBe(200);
      const login = githubUser();
      const query = { code: fake.issueCode(login), installation_id: String(fake.addInstallation(login, [login])), setup_action: 'install' };
      proxy.cut();
      const res = await cut.request(
        'GET',
        `/v1/connectors/github/setup?${new URLSearchParams({ ...query, state: stateOf(link.json.url) })}`,
      );
      expectPage(res, 503, 'unavailable');
      expect(res.headers.get('retry-after')).toBe('5');
    } finally {
      proxy.restore();
      await cut.stop();
      await proxy.close();
    }
  });
});

describe('after every flow above', () => {
  it('no token the fake GitHub issued, nor the client secret, reached the logs', () => {
    expect(fake.issuedTokens.length).toBeGreaterThan(4);
    const text = JSON.stringify(stack.logs);
    for (const token of [...fake.issuedTokens, fake.clientSecret]) expect(text).not.toContain(token);
  });
});
