/**
 * POST /v1/mcp-connections/resolve end to end: real HTTP into the app, a real Temporal
 * workflow and worker, real MCP servers on loopback (allowlisted by exact origin), and a
 * connection-counting server that is not allowlisted. The worker's probes use a resolver that
 * never asks DNS, and a tripwire refuses any socket beyond loopback.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { MCP_PRESETS } from '../../src/mcp/presets';
import { createTestOrg, type TestMember } from '../harness/identity';
import { closedPort } from '../harness/ports';
import { waitFor } from '../harness/wait';
import {
  installLoopbackTripwire,
  isWrite,
  recordSql,
  startCountingServer,
  startEverythingServer,
  startMcpStack,
  startPlainServer,
  startResettingServer,
  startTestMcpServer,
  startUtilityServer,
  testResolver,
  type McpStack,
} from '../harness/mcp';

const PATH = '/v1/mcp-connections/resolve';

let tripwire: ReturnType<typeof installLoopbackTripwire>;
let stack: McpStack;
let everything: Awaited<ReturnType<typeof startEverythingServer>>;
let oauth: Awaited<ReturnType<typeof startTestMcpServer>>;
let mismatch: Awaited<ReturnType<typeof startTestMcpServer>>;
let open: Awaited<ReturnType<typeof startTestMcpServer>>;
let plain: Awaited<ReturnType<typeof startPlainServer>>;
let utility: Awaited<ReturnType<typeof startUtilityServer>>;
let resetting: Awaited<ReturnType<typeof startResettingServer>>;
let counting: Awaited<ReturnType<typeof startCountingServer>>;
let closed: number;
// vm.internal is an internal name: it resolves to loopback, which the guard refuses.
const resolver = testResolver({ 'vm.internal': ['127.0.0.1'] });
let admin: TestMember;
let member: TestMember;
let ownerSession: string;
let memberSession: string;

beforeAll(async () => {
  tripwire = installLoopbackTripwire();
  [everything, oauth, mismatch, open, plain, utility, resetting, counting, closed] = await Promise.all([
    startEverythingServer(),
    startTestMcpServer({ oauth: true }),
    startTestMcpServer({ oauth: true, issuerMismatch: true }),
    startTestMcpServer(),
    startPlainServer(),
    startUtilityServer(),
    startResettingServer(),
    startCountingServer(),
    closedPort(),
  ]);
  const allowlist = [everything, oauth, mismatch, open, plain, utility, resetting]
    .map((s) => s.origin)
    .concat(`http://127.0.0.1:${closed}`);
  stack = await startMcpStack({
    env: {
      MCP_PRIVATE_ALLOWLIST: allowlist.join(','),
      MCP_ALLOW_PRIVATE_NETWORK: 'false',
      MCP_PREREGISTERED_OAUTH_CLIENTS: JSON.stringify({ 'https://mcp.slack.com/mcp': { clientId: 'den-slack-client' } }),
    },
    network: { resolve: resolver },
  });
  const org = await createTestOrg(stack.services.database.db);
  admin = await org.addMember('admin');
  member = await org.addMember('member');
  ownerSession = (await org.session(org.owner.memberId)).token;
  memberSession = (await org.session(member.memberId)).token;
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await Promise.all([everything, oauth, mismatch, open, plain, utility, resetting, counting].map((s) => s?.stop()));
  tripwire.restore();
  expect(tripwire.violations).toEqual([]);
});

const resolve = (query: unknown, headers: Record<string, string> = admin.headers) =>
  stack.request('POST', PATH, { headers, body: { query } });

describe('access', () => {
  it('no credentials → 401 {error:"unauthorized"}', async () => {
    const res = await stack.request('POST', PATH, { body: { query: 'notion' } });
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ error: 'unauthorized' });
  });

  it('a wrong API key or session → 401', async () => {
    for (const headers of [{ 'x-api-key': 'den_nope' }, { authorization: 'Bearer nope' }] as Record<string, string>[]) {
      const res = await resolve('notion', headers);
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ error: 'unauthorized' });
    }
  });

  it('a member, by API key or session → 403 admin_required', async () => {
    for (const headers of [member.headers, { authorization: `Bearer ${memberSession}` }]) {
      const res = await resolve('!!!', headers);
      expect(res.status).toBe(403);
      expect(res.json).toEqual({ error: 'forbidden', reason: 'admin_required', message: expect.any(String) });
      expect(res.json.message.length).toBeGreaterThan(0);
    }
  });

  it('an admin API key and an owner session → 200', async () => {
    for (const headers of [admin.headers, { authorization: `Bearer ${ownerSession}` }]) {
      const res = await resolve('!!!', headers);
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ resolution: 'not_found', attempted: [], reason: 'Type a server URL or a product name.' });
    }
  });
});

describe('validation', () => {
  it.each([
    ['an empty object', {}],
    ['an empty query', { query: '' }],
    ['201 characters', { query: 'a'.repeat(201) }],
    ['a number', { query: 42 }],
    ['null', { query: null }],
    ['an array body', ['notion']],
  ])('%s → 400 InvalidRequestError', async (_label, body) => {
    const res = await stack.request('POST', PATH, { headers: admin.headers, body });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_request');
    expect(res.json.details.length).toBeGreaterThan(0);
    for (const detail of res.json.details) expect(typeof detail.message).toBe('string');
  });

  it('a body that is not JSON → 400 InvalidRequestError', async () => {
    const res = await stack.request('POST', PATH, { headers: { ...admin.headers, 'content-type': 'application/json' }, raw: '{"query":' });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'invalid_request', details: [{ message: expect.any(String), path: [] }] });
  });

  it('200 characters is accepted (and this one is not a URL or a name)', async () => {
    const res = await resolve('a'.repeat(200));
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ resolution: 'not_found', attempted: [], reason: 'Type a server URL or a product name.' });
  });

  it('the path at /v1/mcp-connections/resolve is in the OpenAPI document, admin-only with both schemes', async () => {
    const doc = (await stack.request('GET', '/openapi.json')).json;
    const op = doc.paths[PATH].post;
    expect(op.security).toEqual([{ bearerAuth: [] }, { denApiKey: [] }]);
    expect(Object.keys(op.responses).sort()).toEqual(['200', '400', '401', '403', '413', '429', '503']);
    expect(op.requestBody.required).toBe(true);
    // The 413 the document lists is the one the body reader answers.
    const big = await stack.request('POST', PATH, { headers: admin.headers, body: { query: 'x'.repeat(17 * 1024) } });
    expect(big.status).toBe(413);
  });
});

describe('presets', () => {
  const notion = MCP_PRESETS.find((p) => p.presetId === 'notion')!;

  it.each(['notion', 'Notion', 'https://mcp.notion.com/mcp', 'mcp.notion.com'])(
    '%p → preset with the full preset object',
    async (query) => {
      const res = await resolve(query);
      expect(res.status).toBe(200);
      expect(res.json.resolution).toBe('preset');
      expect(res.json.preset).toEqual(notion);
      // Only the preset's URL is probed. Here it cannot be reached (the test resolver answers no
      // public name), so there is no match, and the reason says why.
      expect(res.json.attempted).toEqual(['https://mcp.notion.com/mcp']);
      expect(res.json.match).toBeUndefined();
      expect(res.json.reason).toContain('Could not resolve mcp.notion.com');
    },
  );

  it('asked the injected resolver, never the network', () => {
    expect(resolver.asked).toContain('mcp.notion.com');
    expect(tripwire.violations).toEqual([]);
  });

  describe('GitHub, by name, by its server and by its product domain', () => {
    const github = MCP_PRESETS.find((p) => p.presetId === 'github')!;

    it.each([
      ['github', 'by name.'],
      ['GitHub', 'by name.'],
      ['api.githubcopilot.com', "by its server's host, api.githubcopilot.com."],
      ['github.com', 'by domain: the query names github.com.'],
      ['https://github.com/org/repo', 'by domain: the query names github.com.'],
      ['www.github.com', 'by domain: the query names github.com.'],
    ])('%p → the GitHub preset, having probed its URL only', async (query, how) => {
      const asked = resolver.asked.length;
      const res = await resolve(query);
      expect(res.status).toBe(200);
      expect(res.json.resolution).toBe('preset');
      expect(res.json.preset).toEqual(github);
      expect(res.json.reason.startsWith(`Matched the GitHub preset ${how} Its server could not be probed. `)).toBe(true);
      // The preset's URL is the only candidate: never github.com, www.github.com or mcp.github.com.
      expect(res.json.attempted).toEqual(['https://api.githubcopilot.com/mcp/']);
      expect(resolver.asked.slice(asked)).toEqual(['api.githubcopilot.com']);
    });

    it.each([
      ['github.com.evil.example', ['github.com.evil.example', 'mcp.github.com.evil.example']],
      ['notgithub.com', ['notgithub.com', 'mcp.notgithub.com']],
      ['https://notgithub.com/org/repo', ['notgithub.com']],
    ])('the look-alike %p is not GitHub: its own candidates, discovered as any host', async (query, hosts) => {
      const asked = resolver.asked.length;
      const res = await resolve(query);
      expect(res.json.resolution).toBe('not_found');
      expect(res.json.preset).toBeUndefined();
      expect(res.json.attempted).not.toContain('https://api.githubcopilot.com/mcp/');
      expect(res.json.attempted.map((url: string) => new URL(url).hostname)).toEqual(expect.arrayContaining(hosts));
      expect(new Set(resolver.asked.slice(asked))).toEqual(new Set(hosts));
    });
  });

  it('MCP_PREREGISTERED_OAUTH_CLIENTS fills the Slack preset', async () => {
    const res = await resolve('Slack');
    expect(res.json.preset).toEqual({
      ...MCP_PRESETS.find((p) => p.presetId === 'slack'),
      defaultOAuthClientId: 'den-slack-client',
      requiresOAuthClient: false,
    });
  });
});

describe('discovery through the workflow', () => {
  it('server-everything → discovered, ready, no auth, its real tools', async () => {
    const direct = new Client({ name: 'direct', version: '1' }, { capabilities: {} });
    await direct.connect(new StreamableHTTPClientTransport(new URL(everything.url)));
    const real = (await direct.listTools()).tools.map((t) => t.name);
    await direct.close();

    const res = await resolve(everything.url);
    expect(res.status).toBe(200);
    expect(res.json.resolution).toBe('discovered');
    expect(res.json.attempted).toEqual([everything.url]);
    expect(res.json.preset).toBeUndefined();
    expect(res.json.match.url).toBe(everything.url);
    expect(res.json.match.suggestedName).toBe('127.0.0.1');
    const d = res.json.match.discovery;
    expect(d.status).toBe('ready');
    expect(d.server).toEqual({
      url: everything.url,
      initialize: 'succeeded',
      protocolVersion: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/),
    });
    expect(d.authentication.kind).toBe('none');
    expect(d.tools.visibility).toBe('available_without_auth');
    expect(d.tools.count).toBe(real.length);
    expect(d.tools.items.map((t: { name: string }) => t.name)).toEqual(real);
    expect(d.manualRequirements.map((r: { code: string }) => r.code)).toEqual(['provider_access', 'network_trust']);
  });

  it('a bare origin probes the root and /mcp; the first qualifying candidate wins', async () => {
    const res = await resolve(everything.origin);
    expect(res.json.resolution).toBe('discovered');
    expect(res.json.attempted).toEqual([`${everything.origin}/`, everything.url]);
    expect(res.json.match.url).toBe(everything.url);
  });

  it('an MCP server behind OAuth → discovered with everything the flow needs, nothing registered', async () => {
    const res = await resolve(oauth.url);
    expect(res.json.resolution).toBe('discovered');
    const d = res.json.match.discovery;
    expect(d.status).toBe('ready');
    expect(d.server.initialize).toBe('authentication_required');
    expect(d.authentication).toMatchObject({
      kind: 'oauth',
      requiredScopes: ['files:read', 'files:write'],
      refreshSupport: 'supported',
      availableRegistrationMethods: ['client_metadata', 'pre_registered', 'dynamic'],
      recommendedRegistrationMethod: 'client_metadata',
      resource: oauth.url,
      protectedResourceMetadataUrl: `${oauth.origin}/.well-known/oauth-protected-resource/mcp`,
    });
    expect(d.authentication.authorizationServers).toEqual([
      expect.objectContaining({
        issuer: oauth.origin,
        clientIdMetadataDocumentSupported: true,
        registrationEndpoint: `${oauth.origin}/register`,
      }),
    ]);
    expect(oauth.seen.filter((r) => ['/register', '/token', '/authorize'].includes(r.path))).toEqual([]);
  });

  it('an issuer mismatch → warning oauth_issuer_mismatch', async () => {
    const res = await resolve(mismatch.url);
    expect(res.json.resolution).toBe('discovered');
    const d = res.json.match.discovery;
    expect(d.warnings.map((w: { code: string }) => w.code)).toContain('oauth_issuer_mismatch');
    expect(d.authentication.authorizationServers).toEqual([]);
  });

  it('a plain web server as the only candidate → not_found, unsupported', async () => {
    const res = await resolve(`${plain.origin}/mcp`);
    expect(res.json).toEqual({
      resolution: 'not_found',
      attempted: [`${plain.origin}/mcp`],
      reason: expect.stringContaining(`${plain.origin}/mcp: unsupported: ${plain.origin}/mcp answered HTTP 404`),
    });
  });

  it('a closed port → not_found, unreachable', async () => {
    const url = `http://127.0.0.1:${closed}/mcp`;
    const res = await resolve(url);
    expect(res.json).toEqual({
      resolution: 'not_found',
      attempted: [url],
      reason: `No MCP server was found. ${url}: unreachable: Connection to 127.0.0.1:${closed} was refused`,
    });
  });

  it('a connection reset is retried once, and only once', async () => {
    const before = resetting.connections();
    const res = await resolve(`${resetting.origin}/mcp`);
    expect(res.json.resolution).toBe('not_found');
    expect(res.json.reason).toMatch(/reset/);
    expect(resetting.connections() - before).toBe(2);
  });
});

describe('the SSRF battery over the network (flag off, counting server not allowlisted)', () => {
  beforeEach(() => counting.reset());

  const forms = () => {
    const p = counting.port;
    return [
      `http://127.0.0.1:${p}`,
      `https://127.0.0.1:${p}`,
      `http://localhost:${p}`,
      `https://localhost:${p}`,
      `http://[::1]:${p}`,
      `https://[::1]:${p}`,
      `http://[::ffff:127.0.0.1]:${p}`,
      `https://[::ffff:127.0.0.1]:${p}`,
      `http://2130706433:${p}`,
      `https://2130706433:${p}`,
      `http://0x7f000001:${p}`,
      `https://0x7f000001:${p}`,
      `http://0177.0.0.1:${p}`,
      `https://0177.0.0.1:${p}`,
      `http://0.0.0.0:${p}`,
      `https://0.0.0.0:${p}`,
      `127.0.0.1:${p}`, // a bare host: https://, plus /mcp
      `localhost.:${p}`,
    ];
  };

  it('every form is refused with zero connections, and the refusal shows in attempted and reason', async () => {
    const results = await Promise.all(forms().map(async (query) => ({ query, res: await resolve(query) })));
    for (const { query, res } of results) {
      expect({ query, status: res.status, resolution: res.json.resolution }).toEqual({ query, status: 200, resolution: 'not_found' });
      expect(res.json.attempted.length).toBeGreaterThanOrEqual(1);
      for (const url of res.json.attempted) {
        expect(res.json.reason).toContain(`${url}: unreachable: Blocked`);
      }
    }
    expect(counting.connections()).toBe(0);
  });

  it('the attempted URLs are the normalized candidates', async () => {
    const res = await resolve(`http://0x7f000001:${counting.port}`);
    expect(res.json.attempted).toEqual([`http://127.0.0.1:${counting.port}/`, `http://127.0.0.1:${counting.port}/mcp`]);
    expect(res.json.reason).toContain('uses plain http; only https is allowed');
    const tls = await resolve(`https://2130706433:${counting.port}/mcp`);
    expect(tls.json.attempted).toEqual([`https://127.0.0.1:${counting.port}/mcp`]);
    expect(tls.json.reason).toContain('Blocked: the address of 127.0.0.1 is not allowed');
    expect(counting.connections()).toBe(0);
  });

  // The answer says only that an internal name's address is not allowed; which address it is goes to the server's log.
  it('a name that resolves to a private address: refused without naming the address', async () => {
    const query = `https://vm.internal:${counting.port}/mcp`;
    const res = await resolve(query);
    expect(res.json.resolution).toBe('not_found');
    expect(res.json.attempted).toEqual([query]);
    expect(res.json.reason).toContain(`${query}: unreachable: Blocked: the address of vm.internal is not allowed`);
    const text = res.text.replaceAll(query, '');
    expect(text).not.toMatch(/\b\d{1,3}(\.\d{1,3}){3}\b/);
    expect(text).not.toMatch(/::1|127\.|loopback|\/8\b/);
    expect(counting.connections()).toBe(0);
    const logged = await waitFor(() => stack.logs.find((line) => line.msg === 'mcp probe refused' && line.request === query));
    expect(logged.detail).toContain('vm.internal resolves to 127.0.0.1 is in 127.0.0.0/8 (loopback)');
  });

  it('a redirect from an allowlisted server to the counting server is refused', async () => {
    for (const target of [
      `http://127.0.0.1:${counting.port}/mcp`,
      `https://[::1]:${counting.port}/mcp`,
      `http://localhost:${counting.port}/mcp`,
    ]) {
      const query = `${utility.origin}/redirect?status=307&to=${encodeURIComponent(target)}`;
      const res = await resolve(query);
      expect(res.json.resolution).toBe('not_found');
      expect(res.json.attempted).toEqual([query]);
      expect(res.json.reason).toContain(`${query}: unreachable: Blocked`);
    }
    expect(counting.connections()).toBe(0);
    // The allowlisted server did see the first hop, so the redirect really was offered.
    expect(utility.seen.filter((r) => r.path === '/redirect').length).toBeGreaterThanOrEqual(3);
  });
});

describe('no side effects', () => {
  it('no database write and nothing but the handshake and the listing at the target', async () => {
    await resolve('!!!'); // warms up the API key (its last-used stamp is written at most once a minute)
    await new Promise((r) => setTimeout(r, 200));
    const sql = recordSql();
    const seenBefore = open.seen.length;
    try {
      const res = await resolve(open.url);
      expect(res.json.resolution).toBe('discovered');
      expect(res.json.match.discovery.tools.count).toBe(2);
    } finally {
      sql.restore();
    }
    expect(sql.statements.length).toBeGreaterThan(0); // the recorder works: the key lookup was seen
    // The worker in this process publishes its task queues' engine delay every ENGINE_DELAY_INTERVAL
    // (1 s), whatever it runs: that upsert is not the resolve's.
    const ownWrites = sql.statements.filter(isWrite).filter((statement) => !/^\s*insert into "engine_delays"/.test(statement));
    expect(ownWrites).toEqual([]);
    const seen = open.seen.slice(seenBefore);
    expect(seen.flatMap((r) => r.rpc)).toEqual(['initialize', 'notifications/initialized', 'tools/list']);
    // POSTs carry the JSON-RPC above; the one GET is the SDK opening the optional server-to-client
    // stream (a read). No DELETE, PUT or PATCH: the session is left to expire.
    const others = seen.filter((r) => r.method !== 'POST').map((r) => `${r.method} ${r.path}`);
    expect(others.length).toBeLessThanOrEqual(1);
    for (const other of others) expect(other).toBe('GET /mcp');
  });
});
