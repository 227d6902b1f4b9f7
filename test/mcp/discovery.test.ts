/**
 * Discovery against real MCP servers on loopback (allowlisted exactly as MCP_PRIVATE_ALLOWLIST
 * would), without Temporal: the activity's logic on its own. The route tests cover the rest.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { discoverMcpServer, protectedResourceMetadataUrls, type DiscoveryOptions } from '../../src/mcp/discovery';
import { closedPort } from '../harness/ports';
import {
  installLoopbackTripwire,
  startEverythingServer,
  startLegacySseServer,
  startPagedToolsServer,
  startPlainServer,
  startResettingServer,
  startTestMcpServer,
  testResolver,
} from '../harness/mcp';

let tripwire: ReturnType<typeof installLoopbackTripwire>;
let everything: Awaited<ReturnType<typeof startEverythingServer>>;
let oauth: Awaited<ReturnType<typeof startTestMcpServer>>;
let mismatch: Awaited<ReturnType<typeof startTestMcpServer>>;
let open: Awaited<ReturnType<typeof startTestMcpServer>>;
let plain: Awaited<ReturnType<typeof startPlainServer>>;
let legacy: Awaited<ReturnType<typeof startLegacySseServer>>;
let resetting: Awaited<ReturnType<typeof startResettingServer>>;
let closed: number;
let otherResource: Awaited<ReturnType<typeof startTestMcpServer>>;
let paged: Awaited<ReturnType<typeof startPagedToolsServer>>;
let wide: Awaited<ReturnType<typeof startPagedToolsServer>>;

beforeAll(async () => {
  tripwire = installLoopbackTripwire();
  [paged, wide, otherResource] = await Promise.all([
    startPagedToolsServer(10),
    startPagedToolsServer(150),
    startTestMcpServer({ oauth: true, resourceMismatch: true }),
  ]);
  [everything, oauth, mismatch, open, plain, legacy, resetting, closed] = await Promise.all([
    startEverythingServer(),
    startTestMcpServer({ oauth: true }),
    startTestMcpServer({ oauth: true, issuerMismatch: true }),
    startTestMcpServer(),
    startPlainServer(),
    startLegacySseServer(),
    startResettingServer(),
    closedPort(),
  ]);
}, 30_000);

afterAll(async () => {
  await Promise.all([everything, oauth, mismatch, open, plain, legacy, resetting, paged, wide, otherResource].map((s) => s?.stop()));
  tripwire.restore();
  expect(tripwire.violations).toEqual([]);
});

function probe(url: string, extra: Partial<DiscoveryOptions> = {}) {
  return discoverMcpServer({
    url,
    deadline: Date.now() + 7_000,
    allowPrivateNetwork: false,
    privateAllowlist: [everything, oauth, mismatch, open, plain, legacy, resetting, paged, wide, otherResource]
      .map((s) => s.origin)
      .concat(`http://127.0.0.1:${closed}`),
    resolve: testResolver(),
    ...extra,
  });
}

it('server-everything over Streamable HTTP: ready, no auth, the real tools', async () => {
  // What the server itself lists, asked directly (plain loopback fetch, no guard).
  const direct = new Client({ name: 'direct', version: '1' }, { capabilities: {} });
  await direct.connect(new StreamableHTTPClientTransport(new URL(everything.url)));
  const real = (await direct.listTools()).tools.map((t) => t.name);
  await direct.close();

  const { discovery } = await probe(everything.url);
  expect(discovery.status).toBe('ready');
  expect(discovery.server.initialize).toBe('succeeded');
  expect(discovery.server.protocolVersion).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  expect(discovery.authentication.kind).toBe('none');
  expect(discovery.tools.visibility).toBe('available_without_auth');
  expect(real.length).toBeGreaterThan(5);
  expect(discovery.tools.count).toBe(real.length);
  expect(discovery.tools.items.map((t) => t.name)).toEqual(real);
  expect(real).toEqual(expect.arrayContaining(['echo', 'get-sum']));
  expect(discovery.warnings).toEqual([]);
});

it('keeps the tool hints (and the MCP defaults when a hint is left out)', async () => {
  const { discovery } = await probe(open.url);
  expect(discovery.tools.items).toEqual([
    { name: 'lookup', readOnlyHint: true, destructiveHint: false, openWorldHint: false },
    { name: 'delete_everything', readOnlyHint: false, destructiveHint: true, openWorldHint: true },
  ]);
  // Read-only: only the handshake and the listing reached the server.
  expect(open.seen.flatMap((r) => r.rpc)).toEqual(['initialize', 'notifications/initialized', 'tools/list']);
});

it('tools/list stops after 5 pages', async () => {
  const { discovery } = await probe(paged.url);
  expect(discovery.tools.count).toBe(50);
  expect(discovery.tools.items[49]!.name).toBe('tool_4_9');
  expect(paged.listCalls()).toBe(5);
});

it('tools/list keeps at most 100 tools', async () => {
  const { discovery } = await probe(wide.url);
  expect(discovery.tools.count).toBe(100);
  expect(discovery.tools.items).toHaveLength(100);
  expect(wide.listCalls()).toBe(1);
});

it('an SDK McpServer behind OAuth: challenge, RFC 9728 and RFC 8414 metadata, nothing registered', async () => {
  const { discovery } = await probe(oauth.url);
  expect(discovery.status).toBe('ready');
  expect(discovery.server).toEqual({ url: oauth.url, initialize: 'authentication_required' });
  expect(discovery.authentication).toEqual({
    kind: 'oauth',
    authorizationServers: [
      {
        issuer: oauth.origin,
        clientIdMetadataDocumentSupported: true,
        authorizationEndpoint: `${oauth.origin}/authorize`,
        tokenEndpoint: `${oauth.origin}/token`,
        registrationEndpoint: `${oauth.origin}/register`,
        scopesSupported: ['files:read', 'files:write', 'offline_access'],
        grantTypesSupported: ['authorization_code', 'refresh_token'],
        codeChallengeMethodsSupported: ['S256'],
        tokenEndpointAuthMethodsSupported: ['none', 'client_secret_basic'],
      },
    ],
    requiredScopes: ['files:read', 'files:write'],
    recommendedScopes: ['files:read', 'files:write', 'offline_access'],
    refreshSupport: 'supported',
    availableRegistrationMethods: ['client_metadata', 'pre_registered', 'dynamic'],
    recommendedRegistrationMethod: 'client_metadata',
    resource: oauth.url,
    protectedResourceMetadataUrl: `${oauth.origin}/.well-known/oauth-protected-resource/mcp`,
  });
  expect(discovery.tools).toEqual({ visibility: 'requires_auth', count: 0, items: [] });
  expect(discovery.manualRequirements.filter((r) => r.required)).toEqual([]);
  expect(discovery.warnings).toEqual([]);
  // No registration, no token request, no authorization request.
  const paths = oauth.seen.map((r) => `${r.method} ${r.path}`);
  expect(paths).toEqual(['POST /mcp', 'GET /.well-known/oauth-protected-resource/mcp', 'GET /.well-known/oauth-authorization-server']);
});

it('really is an MCP server behind that challenge (control: with a token it lists tools)', async () => {
  const client = new Client({ name: 'direct', version: '1' }, { capabilities: {} });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(oauth.url), { requestInit: { headers: { authorization: 'Bearer valid-token' } } }),
  );
  expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['lookup', 'delete_everything']);
  await client.close();
});

it('an issuer mismatch discards the metadata and warns oauth_issuer_mismatch', async () => {
  const { discovery } = await probe(mismatch.url);
  expect(discovery.authentication.kind).toBe('oauth'); // the resource metadata was found
  expect(discovery.authentication.authorizationServers).toEqual([]);
  expect(discovery.warnings.map((w) => w.code)).toEqual(['oauth_issuer_mismatch']);
  expect(discovery.warnings[0]!.message).toContain(`${mismatch.origin}/someone-else`);
  expect(discovery.status).toBe('manual_action_required');
  expect(discovery.manualRequirements.find((r) => r.code === 'oauth_client_registration')?.required).toBe(true);
});

it('protected-resource metadata for another resource is not used (RFC 9728 §3.3)', async () => {
  const { discovery } = await probe(otherResource.url);
  expect(discovery.authentication.kind).toBe('manual_bearer');
  expect(discovery.authentication.protectedResourceMetadataUrl).toBeUndefined();
  expect(discovery.warnings.map((w) => w.code)).toEqual(['oauth_resource_metadata_unavailable']);
  expect(discovery.warnings[0]!.message).toContain(
    `its resource ${otherResource.origin}/some-other-api does not cover ${otherResource.url}`,
  );
  expect(discovery.status).toBe('manual_action_required');
});

it('MCP_PREREGISTERED_OAUTH_CLIENTS downgrades the client registration requirement', async () => {
  const { discovery } = await probe(mismatch.url, { preregisteredClients: { [mismatch.url]: { clientId: 'den' } } });
  expect(discovery.manualRequirements.find((r) => r.code === 'oauth_client_registration')?.required).toBe(false);
});

it('a plain web server that is not MCP: unsupported, after one legacy SSE try', async () => {
  const { discovery } = await probe(`${plain.origin}/`);
  expect(discovery.status).toBe('unsupported');
  expect(discovery.server.initialize).toBe('failed');
  expect(discovery.warnings.map((w) => w.code)).toEqual(['mcp_http_404']);
  expect(plain.seen).toEqual(['POST /', 'GET /']);
});

it('the legacy HTTP+SSE transport is tried once after a 404/405, and reported', async () => {
  const { discovery } = await probe(legacy.url);
  expect(discovery.status).toBe('ready');
  expect(discovery.server.initialize).toBe('succeeded');
  expect(discovery.tools.items.map((t) => t.name)).toEqual(['lookup', 'delete_everything']);
  expect(discovery.warnings.map((w) => w.code)).toEqual(['legacy_sse_transport']);
});

it('a closed port: unreachable, mcp_unreachable', async () => {
  const outcome = await probe(`http://127.0.0.1:${closed}/mcp`);
  expect(outcome.discovery.status).toBe('unreachable');
  expect(outcome.discovery.warnings).toEqual([{ code: 'mcp_unreachable', message: `Connection to 127.0.0.1:${closed} was refused` }]);
  expect(outcome.connectionReset).toBe(false);
});

it('a reset connection is flagged for the one retry', async () => {
  const outcome = await probe(`${resetting.origin}/mcp`);
  expect(outcome.discovery.status).toBe('unreachable');
  expect(outcome.discovery.warnings[0]!.message).toMatch(/reset/);
  expect(outcome.connectionReset).toBe(true);
});

it('a refused target is unreachable with the guard reason, and discovery is still complete', async () => {
  const outcome = await probe(everything.url, { privateAllowlist: [] });
  expect(outcome.discovery).toMatchObject({
    status: 'unreachable',
    server: { url: everything.url, initialize: 'failed' },
    authentication: {
      kind: 'unknown',
      authorizationServers: [],
      refreshSupport: 'unknown',
      availableRegistrationMethods: ['pre_registered'],
    },
    tools: { visibility: 'unavailable', count: 0, items: [] },
  });
  expect(outcome.discovery.warnings[0]).toEqual({
    code: 'mcp_unreachable',
    message: `Blocked: ${everything.origin} uses plain http; only https is allowed`,
  });
});

it('protected-resource metadata URLs: challenge, then path-specific, then root', () => {
  expect(protectedResourceMetadataUrls('https://a.example/mcp', 'https://a.example/prm')).toEqual([
    'https://a.example/prm',
    'https://a.example/.well-known/oauth-protected-resource/mcp',
    'https://a.example/.well-known/oauth-protected-resource',
  ]);
  expect(protectedResourceMetadataUrls('https://a.example/')).toEqual(['https://a.example/.well-known/oauth-protected-resource']);
});
