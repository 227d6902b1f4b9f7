/** Classification, presets and candidates: pure, no network. */
import { candidateUrls, planResolve, suggestedNameFor } from '../../src/mcp/candidates';
import { classifyQuery } from '../../src/mcp/classify';
import { isDomainOrSubdomain, MCP_PRESETS } from '../../src/mcp/presets';
import type { PresetMatch } from '../../src/mcp/types';

const name = (slug: string) => [
  `https://mcp.${slug}.com/mcp`,
  `https://mcp.${slug}.com/`,
  `https://mcp.${slug}.dev/mcp`,
  `https://mcp.${slug}.io/mcp`,
  `https://mcp.${slug}.ai/mcp`,
];

type Expectation =
  | { kind: 'invalid' }
  | { kind: 'preset'; presetId: string; match?: PresetMatch }
  | { kind: 'url' | 'domain' | 'name'; candidates: string[] };

const bare = (host: string) => [`https://${host}/`, `https://${host}/mcp`, `https://mcp.${host}/mcp`];

const TABLE: [string, Expectation][] = [
  // Presets: by id, by display name, by the host of a URL or a bare host.
  ['notion', { kind: 'preset', presetId: 'notion' }],
  ['Notion', { kind: 'preset', presetId: 'notion' }],
  ['  NOTION ', { kind: 'preset', presetId: 'notion' }],
  ['https://mcp.notion.com/mcp', { kind: 'preset', presetId: 'notion' }],
  ['mcp.notion.com', { kind: 'preset', presetId: 'notion' }],
  ['https://mcp.slack.com/other/path', { kind: 'preset', presetId: 'slack' }],
  ['Context 7', { kind: 'preset', presetId: 'context7' }],
  ['linear', { kind: 'preset', presetId: 'linear' }],
  ['mcp.stripe.com', { kind: 'preset', presetId: 'stripe' }],
  // GitHub: by name, by its server's host, and by its product domain and that domain's subdomains.
  ['github', { kind: 'preset', presetId: 'github', match: { by: 'name' } }],
  ['GitHub', { kind: 'preset', presetId: 'github', match: { by: 'name' } }],
  ['api.githubcopilot.com', { kind: 'preset', presetId: 'github', match: { by: 'host', host: 'api.githubcopilot.com' } }],
  ['https://api.githubcopilot.com/mcp/', { kind: 'preset', presetId: 'github', match: { by: 'host', host: 'api.githubcopilot.com' } }],
  ['github.com', { kind: 'preset', presetId: 'github', match: { by: 'domain', domain: 'github.com' } }],
  ['GITHUB.COM.', { kind: 'preset', presetId: 'github', match: { by: 'domain', domain: 'github.com' } }],
  ['https://github.com/org/repo', { kind: 'preset', presetId: 'github', match: { by: 'domain', domain: 'github.com' } }],
  ['http://github.com', { kind: 'preset', presetId: 'github', match: { by: 'domain', domain: 'github.com' } }],
  ['www.github.com/org/repo', { kind: 'preset', presetId: 'github', match: { by: 'domain', domain: 'github.com' } }],
  ['https://gist.github.com/someone', { kind: 'preset', presetId: 'github', match: { by: 'domain', domain: 'github.com' } }],
  // Other products by their domains.
  ['notion.so', { kind: 'preset', presetId: 'notion', match: { by: 'domain', domain: 'notion.so' } }],
  ['https://www.notion.so/Team-Page-123', { kind: 'preset', presetId: 'notion', match: { by: 'domain', domain: 'notion.so' } }],
  ['linear.app', { kind: 'preset', presetId: 'linear', match: { by: 'domain', domain: 'linear.app' } }],
  ['stripe.com', { kind: 'preset', presetId: 'stripe', match: { by: 'domain', domain: 'stripe.com' } }],
  ['https://sentry.io/organizations/acme/', { kind: 'preset', presetId: 'sentry', match: { by: 'domain', domain: 'sentry.io' } }],
  ['acme.slack.com', { kind: 'preset', presetId: 'slack', match: { by: 'domain', domain: 'slack.com' } }],
  // Look-alikes are not the product's domain: discovered as any other host.
  ['github.com.evil.example', { kind: 'domain', candidates: bare('github.com.evil.example') }],
  ['notgithub.com', { kind: 'domain', candidates: bare('notgithub.com') }],
  ['github.co', { kind: 'domain', candidates: bare('github.co') }],
  ['https://notgithub.com/org/repo', { kind: 'url', candidates: ['https://notgithub.com/org/repo'] }],
  ['https://github.com.evil.example/mcp', { kind: 'url', candidates: ['https://github.com.evil.example/mcp'] }],
  // Product names.
  ['acme', { kind: 'name', candidates: name('acme') }],
  ["Acme Corp's Tools", { kind: 'name', candidates: name('acmecorpstools') }],
  ['Ben & Jerry', { kind: 'name', candidates: name('benjerry') }],
  ['my_server-2', { kind: 'name', candidates: name('myserver2') }],
  ['ex ample', { kind: 'name', candidates: name('example') }],
  ['a'.repeat(64), { kind: 'name', candidates: name('a'.repeat(64)) }],
  ['localhost', { kind: 'name', candidates: name('localhost') }],
  // Bare hosts.
  ['example.com', { kind: 'domain', candidates: ['https://example.com/', 'https://example.com/mcp', 'https://mcp.example.com/mcp'] }],
  ['Example.COM', { kind: 'domain', candidates: ['https://example.com/', 'https://example.com/mcp', 'https://mcp.example.com/mcp'] }],
  ['mcp.example.com', { kind: 'domain', candidates: ['https://mcp.example.com/', 'https://mcp.example.com/mcp'] }],
  ['example.com/api/mcp', { kind: 'domain', candidates: ['https://example.com/api/mcp', 'https://mcp.example.com/mcp'] }],
  [
    'example.com:8443',
    { kind: 'domain', candidates: ['https://example.com:8443/', 'https://example.com:8443/mcp', 'https://mcp.example.com:8443/mcp'] },
  ],
  ['127.0.0.1', { kind: 'domain', candidates: ['https://127.0.0.1/', 'https://127.0.0.1/mcp'] }],
  // URLs with and without a path.
  ['https://example.com', { kind: 'url', candidates: ['https://example.com/', 'https://example.com/mcp'] }],
  ['https://example.com/', { kind: 'url', candidates: ['https://example.com/', 'https://example.com/mcp'] }],
  ['https://example.com/mcp', { kind: 'url', candidates: ['https://example.com/mcp'] }],
  ['https://example.com/?x=1', { kind: 'url', candidates: ['https://example.com/?x=1'] }],
  ['HTTPS://Example.com/MCP', { kind: 'url', candidates: ['https://example.com/MCP'] }],
  ['http://127.0.0.1:3000', { kind: 'url', candidates: ['http://127.0.0.1:3000/', 'http://127.0.0.1:3000/mcp'] }],
  ['http://2130706433:3000/', { kind: 'url', candidates: ['http://127.0.0.1:3000/', 'http://127.0.0.1:3000/mcp'] }],
  ['http://[::1]:4000/mcp', { kind: 'url', candidates: ['http://[::1]:4000/mcp'] }],
  // Invalid.
  ['https://user:pass@example.com', { kind: 'invalid' }],
  ['https://user@example.com/mcp', { kind: 'invalid' }],
  ['https://example.com/#frag', { kind: 'invalid' }],
  ['https://example.com#', { kind: 'invalid' }],
  ['user@example.com', { kind: 'invalid' }],
  ['ftp://example.com', { kind: 'invalid' }],
  ['javascript:alert(1).x', { kind: 'invalid' }],
  ['hello world.com', { kind: 'invalid' }],
  ['https://exa mple.com', { kind: 'invalid' }],
  ['https://', { kind: 'invalid' }],
  ['!!!', { kind: 'invalid' }],
  ['-foo', { kind: 'invalid' }],
  ['a'.repeat(65), { kind: 'invalid' }],
  ['   ', { kind: 'invalid' }],
  ['..', { kind: 'invalid' }],
  ['notion!', { kind: 'invalid' }],
];

describe('classification, presets and candidates', () => {
  it('has at least 25 queries', () => expect(TABLE.length).toBeGreaterThanOrEqual(25));

  it.each(TABLE)('%p', (query, expected) => {
    const plan = planResolve(query);
    if (expected.kind === 'invalid') {
      expect(plan).toEqual({ kind: 'invalid' });
      return;
    }
    if (plan.kind !== 'probe') throw new Error(`expected a probe plan for ${query}`);
    if (expected.kind === 'preset') {
      const preset = MCP_PRESETS.find((p) => p.presetId === expected.presetId)!;
      expect(plan.preset).toEqual(preset);
      if (expected.match) expect(plan.presetMatch).toEqual(expected.match);
      // On a match, only the preset's URL is probed.
      expect(plan.candidates).toEqual([{ url: preset.url, source: 'preset', suggestedName: preset.displayName }]);
      return;
    }
    expect(plan.preset).toBeUndefined();
    expect(plan.query.kind).toBe(expected.kind);
    expect(plan.candidates.map((c) => c.url)).toEqual(expected.candidates);
    expect(plan.candidates.every((c) => c.source === expected.kind)).toBe(true);
    expect(plan.candidates.length).toBeLessThanOrEqual(5);
  });

  it('reads names as slugs of lowercase alphanumerics', () => {
    expect(classifyQuery("Ben & Jerry's")).toEqual({ kind: 'name', name: "Ben & Jerry's", slug: 'benjerrys' });
  });

  it('deduplicates and caps candidates at five', () => {
    const urls = candidateUrls({ kind: 'name', name: 'x', slug: 'x' });
    expect(new Set(urls).size).toBe(5);
  });

  it.each([
    ['https://mcp.linear.app/mcp', 'Linear'],
    ['https://www.example.com/', 'Example'],
    ['https://api.acme.io/mcp', 'Acme'],
    ['https://mcp.api.www.acme.dev/mcp', 'Acme'],
    ['https://mcp.acme.com/mcp', 'Acme'],
    ['http://127.0.0.1:3000/', '127.0.0.1'],
    ['http://[::1]:4000/mcp', '::1'],
  ])('suggestedName of %s is %s', (url, expected) => {
    expect(suggestedNameFor(url)).toBe(expected);
  });

  it('a preset match uses the display name as the suggested name', () => {
    const plan = planResolve('https://mcp.polar.sh/mcp/polar-mcp');
    expect(plan.kind === 'probe' && plan.candidates[0]!.suggestedName).toBe('Polar');
  });
});

describe('presets', () => {
  it('carry every field, with the expected name, URL and auth type each', () => {
    const table: Record<string, [string, string, string]> = {
      notion: ['Notion', 'https://mcp.notion.com/mcp', 'oauth'],
      linear: ['Linear', 'https://mcp.linear.app/mcp', 'oauth'],
      stripe: ['Stripe', 'https://mcp.stripe.com', 'oauth'],
      sentry: ['Sentry', 'https://mcp.sentry.dev/mcp', 'oauth'],
      granola: ['Granola', 'https://mcp.granola.ai/mcp', 'oauth'],
      polar: ['Polar', 'https://mcp.polar.sh/mcp/polar-mcp', 'oauth'],
      slack: ['Slack', 'https://mcp.slack.com/mcp', 'oauth'],
      exa: ['Exa', 'https://mcp.exa.ai/mcp', 'apikey'],
      render: ['Render', 'https://mcp.render.com/mcp', 'apikey'],
      context7: ['Context7', 'https://mcp.context7.com/mcp', 'none'],
      github: ['GitHub', 'https://api.githubcopilot.com/mcp/', 'oauth'],
    };
    expect(MCP_PRESETS.map((p) => p.presetId).sort()).toEqual(Object.keys(table).sort());
    for (const preset of MCP_PRESETS) {
      const [displayName, url, authType] = table[preset.presetId]!;
      expect(preset).toMatchObject({ displayName, url, authType });
      expect(preset.description.length).toBeGreaterThan(10);
      expect(preset.supportedAuthTypes).toContain(preset.authType);
      expect(typeof preset.requiresOAuthClient).toBe('boolean');
      expect(Array.isArray(preset.defaultOAuthScopes)).toBe(true);
      expect(preset.domains.length).toBeGreaterThan(0);
      if (preset.docsUrl !== undefined) expect(new URL(preset.docsUrl).protocol).toBe('https:');
    }
  });

  it('domains are lowercase host names, and no preset claims a domain of another (so a host matches one preset at most)', () => {
    const all = MCP_PRESETS.flatMap((p) => p.domains.map((domain) => ({ presetId: p.presetId, domain })));
    for (const { domain } of all) {
      expect(new URL(`https://${domain}/`).hostname).toBe(domain);
      expect(domain).toMatch(/^[a-z0-9-]+(\.[a-z0-9-]+)+$/);
    }
    const clashes = all.filter((a) => all.some((b) => a.presetId !== b.presetId && isDomainOrSubdomain(a.domain, b.domain)));
    expect(clashes).toEqual([]);
  });

  it('a domain matches itself and its subdomains, label for label', () => {
    expect(isDomainOrSubdomain('github.com', 'github.com')).toBe(true);
    expect(isDomainOrSubdomain('www.github.com', 'github.com')).toBe(true);
    expect(isDomainOrSubdomain('a.b.github.com', 'github.com')).toBe(true);
    expect(isDomainOrSubdomain('notgithub.com', 'github.com')).toBe(false);
    expect(isDomainOrSubdomain('github.com.evil.example', 'github.com')).toBe(false);
    expect(isDomainOrSubdomain('github.co', 'github.com')).toBe(false);
    expect(isDomainOrSubdomain('com', 'github.com')).toBe(false);
  });

  it('GitHub: OAuth or a token as bearer, a client of its own (no dynamic registration), its default scopes, its docs', () => {
    const github = MCP_PRESETS.find((p) => p.presetId === 'github')!;
    expect(github).toEqual({
      presetId: 'github',
      displayName: 'GitHub',
      description: expect.any(String),
      url: 'https://api.githubcopilot.com/mcp/',
      authType: 'oauth',
      supportedAuthTypes: ['oauth', 'apikey'],
      requiresOAuthClient: true,
      defaultOAuthScopes: [
        'repo',
        'read:org',
        'read:user',
        'user:email',
        'read:packages',
        'write:packages',
        'read:project',
        'project',
        'gist',
        'notifications',
      ],
      domains: ['github.com'],
      docsUrl: 'https://github.com/github/github-mcp-server/blob/main/docs/remote-server.md',
    });
  });

  it('Slack needs an OAuth client, has an issuer and its default scopes', () => {
    const slack = MCP_PRESETS.find((p) => p.presetId === 'slack')!;
    expect(slack.requiresOAuthClient).toBe(true);
    expect(slack.authorizationServerIssuer).toBe('https://mcp.slack.com');
    expect(slack.defaultOAuthScopes).toEqual([
      'search:read.public',
      'search:read.private',
      'search:read.im',
      'search:read.mpim',
      'search:read.files',
      'chat:write',
      'channels:history',
      'groups:history',
      'im:history',
      'mpim:history',
      'users:read',
    ]);
  });

  it('MCP_PREREGISTERED_OAUTH_CLIENTS fills defaultOAuthClientId and drops requiresOAuthClient, without touching the data', () => {
    const plan = planResolve('slack', { 'https://mcp.slack.com/mcp/': { clientId: 'den-slack-client' } });
    expect(plan.kind === 'probe' && plan.preset).toMatchObject({ defaultOAuthClientId: 'den-slack-client', requiresOAuthClient: false });
    const original = MCP_PRESETS.find((p) => p.presetId === 'slack')!;
    expect(original.requiresOAuthClient).toBe(true);
    expect(original.defaultOAuthClientId).toBeUndefined();
    const other = planResolve('notion', { 'https://mcp.slack.com/mcp': { clientId: 'den-slack-client' } });
    expect(other.kind === 'probe' && other.preset?.defaultOAuthClientId).toBeUndefined();
  });
});
