/**
 * Curated MCP servers: a query that matches one probes only the preset's URL. Data only, plus the
 * two pure functions that use it: matching a query and applying pre-registered OAuth clients.
 */
import type { McpPreset } from './types';

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

export function findPresetByHost(host: string): McpPreset | undefined {
  const wanted = host.toLowerCase().replace(/\.$/, '');
  return MCP_PRESETS.find((p) => hostOf(p.url) === wanted);
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
  };
  if (clientId === undefined) return copy;
  return { ...copy, defaultOAuthClientId: clientId, requiresOAuthClient: false };
}
