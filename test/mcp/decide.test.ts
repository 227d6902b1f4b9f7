/** The enum decisions and the resolution, as pure functions. */
import { decideDiscovery, qualifies, unreachableDiscovery, type ProbeFacts } from '../../src/mcp/decide';
import { assembleResponse } from '../../src/mcp/resolution';
import { MCP_PRESETS } from '../../src/mcp/presets';
import type { McpAuthorizationServer, McpResolveInput } from '../../src/mcp/types';

const URL_ = 'https://mcp.example.com/mcp';

function facts(overrides: Partial<ProbeFacts> = {}): ProbeFacts {
  return {
    url: URL_,
    initializeSucceeded: false,
    httpResponded: true,
    challengeScopes: [],
    authorizationServers: [],
    preregisteredClient: false,
    warnings: [],
    ...overrides,
  };
}

function server(overrides: Partial<McpAuthorizationServer> = {}): McpAuthorizationServer {
  return {
    issuer: 'https://auth.example.com',
    clientIdMetadataDocumentSupported: false,
    authorizationEndpoint: 'https://auth.example.com/authorize',
    tokenEndpoint: 'https://auth.example.com/token',
    scopesSupported: [],
    grantTypesSupported: ['authorization_code'],
    codeChallengeMethodsSupported: ['S256'],
    tokenEndpointAuthMethodsSupported: ['none'],
    ...overrides,
  };
}

const prm = {
  url: 'https://mcp.example.com/.well-known/oauth-protected-resource/mcp',
  resource: URL_,
  scopesSupported: ['read', 'write'],
  authorizationServers: ['https://auth.example.com'],
};

describe('decideDiscovery', () => {
  it('an open server: ready, succeeded, kind none, tools available without auth', () => {
    const d = decideDiscovery(
      facts({
        initializeSucceeded: true,
        lastStatus: 200,
        protocolVersion: '2025-06-18',
        tools: [{ name: 'a', readOnlyHint: true, destructiveHint: false, openWorldHint: false }],
      }),
    );
    expect(d.status).toBe('ready');
    expect(d.server).toEqual({ url: URL_, initialize: 'succeeded', protocolVersion: '2025-06-18' });
    expect(d.authentication.kind).toBe('none');
    expect(d.authentication.refreshSupport).toBe('unknown');
    expect(d.authentication.availableRegistrationMethods).toEqual(['pre_registered']);
    expect(d.authentication.recommendedRegistrationMethod).toBe('pre_registered');
    expect(d.tools).toEqual({
      visibility: 'available_without_auth',
      count: 1,
      items: [{ name: 'a', readOnlyHint: true, destructiveHint: false, openWorldHint: false }],
    });
    expect(d.manualRequirements.map((r) => [r.code, r.required])).toEqual([
      ['provider_access', false],
      ['network_trust', false],
    ]);
  });

  it('no HTTP response at all: unreachable, failed, unknown, unavailable', () => {
    const d = decideDiscovery(facts({ httpResponded: false, warnings: [{ code: 'mcp_unreachable', message: 'refused' }] }));
    expect([d.status, d.server.initialize, d.authentication.kind, d.tools.visibility]).toEqual([
      'unreachable',
      'failed',
      'unknown',
      'unavailable',
    ]);
    expect(d.warnings).toEqual([{ code: 'mcp_unreachable', message: 'refused' }]);
  });

  it('a 404 that is not MCP: unsupported', () => {
    const d = decideDiscovery(facts({ lastStatus: 404 }));
    expect([d.status, d.server.initialize, d.authentication.kind]).toEqual(['unsupported', 'failed', 'unknown']);
  });

  it('a 401 without any metadata: manual bearer, manual action required, registration required', () => {
    const d = decideDiscovery(facts({ lastStatus: 401 }));
    expect([d.status, d.server.initialize, d.authentication.kind, d.tools.visibility]).toEqual([
      'manual_action_required',
      'authentication_required',
      'manual_bearer',
      'requires_auth',
    ]);
    expect(d.manualRequirements.find((r) => r.code === 'oauth_client_registration')?.required).toBe(true);
  });

  it('a 403 counts as authentication required too', () => {
    expect(decideDiscovery(facts({ lastStatus: 403 })).server.initialize).toBe('authentication_required');
  });

  it('OAuth with client metadata documents and dynamic registration: ready', () => {
    const d = decideDiscovery(
      facts({
        lastStatus: 401,
        challengeScopes: ['files:read'],
        resourceMetadata: prm,
        authorizationServers: [
          server({
            clientIdMetadataDocumentSupported: true,
            registrationEndpoint: 'https://auth.example.com/register',
            grantTypesSupported: ['authorization_code', 'refresh_token'],
            scopesSupported: ['offline_access'],
          }),
        ],
      }),
    );
    expect(d.status).toBe('ready');
    expect(d.authentication).toMatchObject({
      kind: 'oauth',
      requiredScopes: ['files:read'],
      recommendedScopes: ['files:read', 'offline_access'],
      refreshSupport: 'supported',
      availableRegistrationMethods: ['client_metadata', 'pre_registered', 'dynamic'],
      recommendedRegistrationMethod: 'client_metadata',
      resource: URL_,
      protectedResourceMetadataUrl: prm.url,
    });
    expect(d.manualRequirements.find((r) => r.code === 'oauth_client_registration')?.required).toBe(false);
  });

  it('recommended scopes fall back to scopes_supported; offline_access only when a server lists it', () => {
    const d = decideDiscovery(
      facts({ lastStatus: 401, resourceMetadata: prm, authorizationServers: [server({ grantTypesSupported: ['refresh_token'] })] }),
    );
    expect(d.authentication.requiredScopes).toEqual([]);
    expect(d.authentication.recommendedScopes).toEqual(['read', 'write']);
    expect(d.authentication.refreshSupport).toBe('supported');
  });

  it('refresh not advertised; dynamic only → recommended dynamic', () => {
    const d = decideDiscovery(
      facts({
        lastStatus: 401,
        resourceMetadata: prm,
        authorizationServers: [server({ registrationEndpoint: 'https://auth.example.com/r' })],
      }),
    );
    expect(d.authentication.refreshSupport).toBe('not_advertised');
    expect(d.authentication.availableRegistrationMethods).toEqual(['pre_registered', 'dynamic']);
    expect(d.authentication.recommendedRegistrationMethod).toBe('dynamic');
    expect(d.status).toBe('ready');
  });

  it('OAuth without self-service registration: client registration required, unless pre-registered', () => {
    const base = facts({ lastStatus: 401, resourceMetadata: prm, authorizationServers: [server()] });
    const d = decideDiscovery(base);
    expect(d.status).toBe('manual_action_required');
    expect(d.manualRequirements.find((r) => r.code === 'oauth_client_registration')?.required).toBe(true);
    const pre = decideDiscovery({ ...base, preregisteredClient: true });
    expect(pre.status).toBe('ready');
    expect(pre.manualRequirements.find((r) => r.code === 'oauth_client_registration')?.required).toBe(false);
  });

  it('more than one authorization server: selection required', () => {
    const d = decideDiscovery(
      facts({
        lastStatus: 401,
        resourceMetadata: prm,
        authorizationServers: [server({ clientIdMetadataDocumentSupported: true }), server({ issuer: 'https://b.example.com' })],
      }),
    );
    expect(d.manualRequirements.find((r) => r.code === 'authorization_server_selection')?.required).toBe(true);
    expect(d.status).toBe('manual_action_required');
  });

  it('resource metadata alone is enough for kind oauth', () => {
    expect(decideDiscovery(facts({ lastStatus: 401, resourceMetadata: prm })).authentication.kind).toBe('oauth');
  });

  it('unreachableDiscovery is complete', () => {
    const d = unreachableDiscovery(URL_, 'The probe timed out.');
    expect(d).toMatchObject({
      status: 'unreachable',
      server: { url: URL_, initialize: 'failed' },
      tools: { visibility: 'unavailable', count: 0, items: [] },
    });
    expect(d.warnings).toEqual([{ code: 'mcp_unreachable', message: 'The probe timed out.' }]);
  });
});

describe('qualifies', () => {
  const open = decideDiscovery(facts({ initializeSucceeded: true, tools: [] }));
  const oauthReady = decideDiscovery(
    facts({ lastStatus: 401, resourceMetadata: prm, authorizationServers: [server({ registrationEndpoint: 'x' })] }),
  );
  const oauthManual = decideDiscovery(facts({ lastStatus: 401, resourceMetadata: prm }));
  const bearer = decideDiscovery(facts({ lastStatus: 401 }));
  const notMcp = decideDiscovery(facts({ lastStatus: 404 }));
  const down = decideDiscovery(facts({ httpResponded: false }));

  it.each([
    { label: 'initialize succeeded', discovery: open, source: 'name', expected: true },
    { label: 'ready with oauth', discovery: oauthReady, source: 'name', expected: true },
    { label: 'authentication required with oauth', discovery: oauthManual, source: 'name', expected: true },
    { label: 'manual bearer from a URL', discovery: bearer, source: 'url', expected: true },
    { label: 'manual bearer from a domain', discovery: bearer, source: 'domain', expected: true },
    { label: 'manual bearer guessed from a name', discovery: bearer, source: 'name', expected: false },
    { label: 'not MCP', discovery: notMcp, source: 'url', expected: false },
    { label: 'unreachable', discovery: down, source: 'url', expected: false },
  ] as const)('$label → $expected', ({ discovery, source, expected }) => {
    expect(qualifies(discovery, source)).toBe(expected);
  });
});

describe('assembleResponse', () => {
  const open = (url: string) => decideDiscovery(facts({ url, initializeSucceeded: true, tools: [] }));
  const down = (url: string) => unreachableDiscovery(url, 'Connection refused');
  const input = (urls: string[]): McpResolveInput => ({
    query: 'acme',
    probeTimeoutMs: 8000,
    candidates: urls.map((url) => ({ url, source: 'name', suggestedName: 'Acme' })),
  });

  it('the first qualifying candidate in candidate order wins, whatever order the probes finished in', () => {
    const urls = ['https://a/mcp', 'https://b/mcp', 'https://c/mcp'];
    const response = assembleResponse(input(urls), [
      { url: urls[2]!, discovery: open(urls[2]!) },
      { url: urls[1]!, discovery: open(urls[1]!) },
      { url: urls[0]!, discovery: down(urls[0]!) },
    ]);
    expect(response.resolution).toBe('discovered');
    expect(response.attempted).toEqual(urls);
    expect(response.match?.url).toBe('https://b/mcp');
    expect(response.match?.suggestedName).toBe('Acme');
  });

  it('not_found lists why each candidate failed', () => {
    const response = assembleResponse(input(['https://a/mcp']), [{ url: 'https://a/mcp', discovery: down('https://a/mcp') }]);
    expect(response).toEqual({
      resolution: 'not_found',
      attempted: ['https://a/mcp'],
      reason: 'No MCP server was found. https://a/mcp: unreachable: Connection refused',
    });
  });

  it('a preset without a qualifying probe still resolves preset, without match', () => {
    const preset = MCP_PRESETS[0]!;
    const response = assembleResponse(
      {
        query: 'notion',
        probeTimeoutMs: 8000,
        preset,
        candidates: [{ url: preset.url, source: 'preset', suggestedName: preset.displayName }],
      },
      [{ url: preset.url, discovery: down(preset.url) }],
    );
    expect(response.resolution).toBe('preset');
    expect(response.preset).toEqual(preset);
    expect(response.match).toBeUndefined();
    expect(response.attempted).toEqual([preset.url]);
    expect(response.reason).toContain('Connection refused');
  });

  it('a preset with a qualifying probe carries the match with the display name', () => {
    const preset = MCP_PRESETS[0]!;
    const response = assembleResponse(
      {
        query: 'notion',
        probeTimeoutMs: 8000,
        preset,
        candidates: [{ url: preset.url, source: 'preset', suggestedName: preset.displayName }],
      },
      [{ url: preset.url, discovery: open(preset.url) }],
    );
    expect(response.match).toEqual({ url: preset.url, suggestedName: 'Notion', discovery: open(preset.url) });
  });

  it.each([
    [{ by: 'name' } as const, 'Matched the GitHub preset by name.'],
    [{ by: 'host', host: 'api.githubcopilot.com' } as const, "Matched the GitHub preset by its server's host, api.githubcopilot.com."],
    [{ by: 'domain', domain: 'github.com' } as const, 'Matched the GitHub preset by domain: the query names github.com.'],
    [undefined, 'Matched the GitHub preset.'],
  ])('the reason says how the query matched its preset (%p)', (presetMatch, sentence) => {
    const preset = MCP_PRESETS.find((p) => p.presetId === 'github')!;
    const base = {
      query: 'github.com',
      probeTimeoutMs: 8000,
      preset,
      ...(presetMatch ? { presetMatch } : {}),
      candidates: [{ url: preset.url, source: 'preset' as const, suggestedName: preset.displayName }],
    };
    const matched = assembleResponse(base, [{ url: preset.url, discovery: open(preset.url) }]);
    expect(matched.reason).toBe(sentence);
    const failed = assembleResponse(base, [{ url: preset.url, discovery: down(preset.url) }]);
    expect(failed.reason).toBe(`${sentence} Its server could not be probed. ${preset.url}: unreachable: Connection refused`);
  });
});
