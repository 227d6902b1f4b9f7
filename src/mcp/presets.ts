/**
 * Curated MCP servers: a query that matches one probes only the preset's URL. Data, plus the pure
 * functions that use it: matching a query, applying pre-registered OAuth clients, and the
 * catalogue a connection screen lists. Where each preset's facts come from: docs/mcp.md.
 */
import type { McpPreset, PresetMatch } from './types';

const SLACK_SCOPES = [
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
];

/**
 * GitHub's default OAuth grant: the scopes GitHub's own server (github/github-mcp-server) requests
 * when it logs in by OAuth in its local (stdio) mode, since the remote server's docs name no
 * default scopes. Its stdio command requests `DefaultScopes` of pkg/http/oauth/oauth.go unless
 * `--oauth-scopes` is given (cmd/github-mcp-server/main.go), and those are `DefaultOAuthScopes` of
 * pkg/scopes/scopes.go, "the lower-risk scopes requested by default". Its remote server asks for
 * more (`delete_repo`, `workflow`, `codespace`) by a scope challenge when a tool needs them.
 */
const GITHUB_SCOPES = [
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
];

export const MCP_PRESETS: readonly McpPreset[] = [
  {
    presetId: 'notion',
    displayName: 'Notion',
    description: 'Search, read and update pages and databases in a Notion workspace.',
    url: 'https://mcp.notion.com/mcp',
    authType: 'oauth',
    supportedAuthTypes: ['oauth'],
    requiresOAuthClient: false,
    defaultOAuthScopes: [],
    domains: ['notion.so', 'notion.com'],
  },
  {
    presetId: 'linear',
    displayName: 'Linear',
    description: 'Find, create and update Linear issues, projects and comments.',
    url: 'https://mcp.linear.app/mcp',
    authType: 'oauth',
    supportedAuthTypes: ['oauth'],
    requiresOAuthClient: false,
    defaultOAuthScopes: [],
    domains: ['linear.app'],
    docsUrl: 'https://linear.app/docs/mcp',
  },
  {
    presetId: 'stripe',
    displayName: 'Stripe',
    description: 'Work with Stripe customers, payments, invoices and the Stripe docs.',
    url: 'https://mcp.stripe.com',
    authType: 'oauth',
    supportedAuthTypes: ['oauth'],
    requiresOAuthClient: false,
    defaultOAuthScopes: [],
    domains: ['stripe.com'],
    docsUrl: 'https://docs.stripe.com/mcp',
  },
  {
    presetId: 'sentry',
    displayName: 'Sentry',
    description: 'Look up Sentry issues, events, releases and projects.',
    url: 'https://mcp.sentry.dev/mcp',
    authType: 'oauth',
    supportedAuthTypes: ['oauth'],
    requiresOAuthClient: false,
    defaultOAuthScopes: [],
    domains: ['sentry.io'],
    docsUrl: 'https://docs.sentry.io/product/sentry-mcp',
  },
  {
    presetId: 'granola',
    displayName: 'Granola',
    description: 'Search and read Granola meeting notes.',
    url: 'https://mcp.granola.ai/mcp',
    authType: 'oauth',
    supportedAuthTypes: ['oauth'],
    requiresOAuthClient: false,
    defaultOAuthScopes: [],
    domains: ['granola.ai'],
  },
  {
    presetId: 'polar',
    displayName: 'Polar',
    description: 'Manage Polar products, customers, orders and subscriptions.',
    url: 'https://mcp.polar.sh/mcp/polar-mcp',
    authType: 'oauth',
    supportedAuthTypes: ['oauth'],
    requiresOAuthClient: false,
    defaultOAuthScopes: [],
    domains: ['polar.sh'],
  },
  {
    presetId: 'slack',
    displayName: 'Slack',
    description: 'Search Slack messages and files, read channel history and post messages.',
    url: 'https://mcp.slack.com/mcp',
    authType: 'oauth',
    supportedAuthTypes: ['oauth'],
    // Slack offers neither dynamic registration nor client-metadata documents.
    requiresOAuthClient: true,
    authorizationServerIssuer: 'https://mcp.slack.com',
    defaultOAuthScopes: SLACK_SCOPES,
    domains: ['slack.com'],
    docsUrl: 'https://docs.slack.dev/ai/slack-mcp-server/',
  },
  {
    presetId: 'exa',
    displayName: 'Exa',
    description: 'Web search and page contents through Exa.',
    url: 'https://mcp.exa.ai/mcp',
    authType: 'apikey',
    supportedAuthTypes: ['apikey'],
    requiresOAuthClient: false,
    defaultOAuthScopes: [],
    domains: ['exa.ai'],
  },
  {
    presetId: 'render',
    displayName: 'Render',
    description: 'Inspect and manage Render services, deploys, logs and databases.',
    url: 'https://mcp.render.com/mcp',
    authType: 'apikey',
    supportedAuthTypes: ['apikey'],
    requiresOAuthClient: false,
    defaultOAuthScopes: [],
    domains: ['render.com'],
  },
  {
    presetId: 'context7',
    displayName: 'Context7',
    description: 'Up-to-date library documentation and code examples.',
    url: 'https://mcp.context7.com/mcp',
    authType: 'none',
    supportedAuthTypes: ['none'],
    requiresOAuthClient: false,
    defaultOAuthScopes: [],
    domains: ['context7.com'],
  },
  {
    presetId: 'github',
    displayName: 'GitHub',
    description: 'Read repositories and code, manage issues and pull requests, and follow GitHub Actions runs.',
    url: 'https://api.githubcopilot.com/mcp/',
    authType: 'oauth',
    // OAuth, or any valid GitHub token (a personal access token) sent as a bearer.
    supportedAuthTypes: ['oauth', 'apikey'],
    // GitHub's remote server offers no dynamic client registration: the deployment brings a GitHub App or OAuth App of its own.
    requiresOAuthClient: true,
    defaultOAuthScopes: GITHUB_SCOPES,
    domains: ['github.com'],
    docsUrl: 'https://github.com/github/github-mcp-server/blob/main/docs/remote-server.md',
  },
];

/** Lowercase alphanumerics: the slug of a product name, and how preset ids and names compare. */
export function slugOf(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]/g, '');
}

function hostOf(url: string): string {
  return new URL(url).hostname.toLowerCase();
}

export function findPresetByName(name: string): McpPreset | undefined {
  const slug = slugOf(name);
  if (!slug) return undefined;
  return MCP_PRESETS.find((p) => slugOf(p.presetId) === slug || slugOf(p.displayName) === slug);
}

/**
 * `host` is `domain` itself or a subdomain of it, label for label: `www.github.com` is, while
 * `notgithub.com` and `github.com.evil.example` are not. Both are lowercase host names.
 */
export function isDomainOrSubdomain(host: string, domain: string): boolean {
  return host === domain || host.endsWith(`.${domain}`);
}

/**
 * The preset a host names: exactly the host of the preset's URL, else one of its product domains
 * or a subdomain of one. `host` is a URL's hostname (lowercase, punycode); a trailing dot is ignored.
 */
export function findPresetByHost(host: string): { preset: McpPreset; match: PresetMatch } | undefined {
  const wanted = host.toLowerCase().replace(/\.$/, '');
  const byUrl = MCP_PRESETS.find((p) => hostOf(p.url) === wanted);
  if (byUrl) return { preset: byUrl, match: { by: 'host', host: wanted } };
  for (const preset of MCP_PRESETS) {
    const domain = preset.domains.find((d) => isDomainOrSubdomain(wanted, d));
    if (domain) return { preset, match: { by: 'domain', domain } };
  }
  return undefined;
}

/** Server URLs compare without a trailing slash, so `https://x/mcp/` and `https://x/mcp` match. */
function sameServerUrl(a: string, b: string): boolean {
  const norm = (value: string) => {
    try {
      return new URL(value).href.replace(/\/+$/, '');
    } catch {
      return value;
    }
  };
  return norm(a) === norm(b);
}

export type PreregisteredClients = Record<string, { clientId: string }>;

export function preregisteredClientFor(url: string, clients: PreregisteredClients): string | undefined {
  for (const [serverUrl, client] of Object.entries(clients)) {
    if (sameServerUrl(serverUrl, url)) return client.clientId;
  }
  return undefined;
}

/** MCP_PREREGISTERED_OAUTH_CLIENTS fills `defaultOAuthClientId` and drops `requiresOAuthClient`. */
export function withPreregisteredClient(preset: McpPreset, clients: PreregisteredClients): McpPreset {
  const clientId = preregisteredClientFor(preset.url, clients);
  const copy: McpPreset = {
    ...preset,
    supportedAuthTypes: [...preset.supportedAuthTypes],
    defaultOAuthScopes: [...preset.defaultOAuthScopes],
    domains: [...preset.domains],
  };
  if (clientId === undefined) return copy;
  return { ...copy, defaultOAuthClientId: clientId, requiresOAuthClient: false };
}

/** The catalogue: every preset in the order above, with MCP_PREREGISTERED_OAUTH_CLIENTS applied as resolve applies them. */
export function presetCatalog(clients: PreregisteredClients): McpPreset[] {
  return MCP_PRESETS.map((preset) => withPreregisteredClient(preset, clients));
}
