/**
 * Probes one candidate URL (docs/mcp.md), entirely through the guarded fetch:
 *
 *  1. MCP `initialize` over Streamable HTTP with the SDK's Client; a 404/405 on the POST gets
 *     one try of the legacy HTTP+SSE transport (warning `legacy_sse_transport`);
 *  2. on success, `tools/list`: at most 5 pages and 100 tools;
 *  3. on 401/403: the challenge (`extractWWWAuthenticateParams`), RFC 9728 protected-resource
 *     metadata (challenge URL → path-specific well-known → root), then RFC 8414 / OIDC metadata
 *     of up to 5 authorization servers with a strict issuer match.
 *
 * Read-only by construction: no tool is called, no client is registered, no token requested,
 * and the MCP session is left to expire rather than DELETEd (no write beyond the handshake).
 * Every fetch failure is taken from the guard's own records, because the SDK hides causes.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { buildDiscoveryUrls, extractWWWAuthenticateParams } from '@modelcontextprotocol/sdk/client/auth.js';
import { OAuthMetadataSchema, OAuthProtectedResourceMetadataSchema } from '@modelcontextprotocol/sdk/shared/auth.js';
import { checkResourceAllowed } from '@modelcontextprotocol/sdk/shared/auth-utils.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { decideDiscovery, type ProbeFacts } from './decide';
import { preregisteredClientFor, type PreregisteredClients } from './presets';
import {
  createGuardedFetch,
  GuardedFetchError,
  type FetchRecord,
  type GuardedFetch,
  type GuardedFetchOptions,
  type GuardSettings,
  type HostResolver,
} from './ssrf/guarded-fetch';
import type { McpAuthorizationServer, McpDiscovery, McpToolItem, McpWarning } from './types';

const MAX_TOOL_PAGES = 5;
const MAX_TOOLS = 100;
const MAX_AUTHORIZATION_SERVERS = 5;

export interface DiscoveryOptions extends GuardSettings {
  url: string;
  /** Epoch ms by which the probe is over, whatever the server does. */
  deadline: number;
  preregisteredClients?: PreregisteredClients;
  resolve?: HostResolver;
  /** Step timeouts and caps of the guard (tests shorten them). */
  guard?: Partial<Omit<GuardedFetchOptions, keyof GuardSettings | 'resolve' | 'deadline'>>;
  now?: () => number;
}

export interface DiscoveryOutcome {
  discovery: McpDiscovery;
  facts: ProbeFacts;
  /** No HTTP answer because the connection was reset: the one failure worth a retry. */
  connectionReset: boolean;
  /** Every request made, for logs and tests. */
  records: FetchRecord[];
}

const CLIENT_INFO = { name: 'den-mcp-resolve', version: '1.0.0' };

function errorMessage(error: unknown): string {
  if (error instanceof GuardedFetchError) return error.failure.message;
  return error instanceof Error ? error.message : String(error);
}

/** The MCP specification's ToolAnnotations defaults, for hints the server leaves out. */
function toolItem(tool: {
  name: string;
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean; openWorldHint?: boolean };
}): McpToolItem {
  const readOnlyHint = tool.annotations?.readOnlyHint ?? false;
  return {
    name: tool.name,
    readOnlyHint,
    // Default true, but only meaningful for tools that are not read-only.
    destructiveHint: tool.annotations?.destructiveHint ?? !readOnlyHint,
    openWorldHint: tool.annotations?.openWorldHint ?? true,
  };
}

async function closeQuietly(client: Client | undefined): Promise<void> {
  if (!client) return;
  await client.close().catch(() => undefined);
}

type Connected = { client?: Client; protocolVersion?: string; error?: string };

/** One discovery's probe: the guarded fetch every request goes through, the MCP endpoint, and the time left (ms). */
interface Probe {
  guard: GuardedFetch;
  url: string;
  remaining: () => number;
}

/** Streamable HTTP first; a 404/405 on its POST gets one try of the legacy HTTP+SSE transport. */
async function connectWithFallback(probe: Probe, warnings: McpWarning[]): Promise<Connected> {
  const { guard, url } = probe;
  const connected = await connect(probe, 'streamable');
  if (connected.client) return connected;
  const last = lastEndpointRecord(guard.records, url);
  if (last?.status !== 404 && last?.status !== 405) return connected;
  const legacy = await connect(probe, 'sse');
  if (!legacy.client) return connected;
  warnings.push({
    code: 'legacy_sse_transport',
    message: 'The server speaks the deprecated HTTP+SSE transport (protocol 2024-11-05), not Streamable HTTP.',
  });
  return legacy;
}

/** Names the answer to the initialize POST, and the legacy try's when there was one. */
function httpAnswerWarning(records: FetchRecord[], url: string, last: FetchRecord): McpWarning {
  const initialize = records.find((r) => r.url === url && r.method === 'POST' && r.status !== undefined) ?? last;
  const status = initialize.status!;
  const what =
    status < 300
      ? `${url} answered HTTP ${status} (${initialize.contentType ?? 'no content type'}) to the MCP initialize request, but not as an MCP server.`
      : `${url} answered HTTP ${status} to the MCP initialize request.`;
  const legacy = last !== initialize ? ` The legacy SSE transport got HTTP ${last.status} (${last.contentType ?? 'no content type'}).` : '';
  return { code: `mcp_http_${status}`, message: `${what}${legacy}` };
}

/** No MCP session: unreachable, an authorization challenge to follow, or another HTTP answer. */
async function explainFailedConnect(probe: Probe, connected: Connected, facts: ProbeFacts): Promise<void> {
  const { guard, url } = probe;
  const warnings = facts.warnings;
  const last = lastEndpointRecord(guard.records, url);
  facts.httpResponded = last?.status !== undefined;
  facts.lastStatus = last?.status;
  if (facts.protocolVersion === undefined && connected.protocolVersion) facts.protocolVersion = connected.protocolVersion;
  if (!facts.httpResponded) {
    const failure = guard.records.find((r) => r.failure && r.url === url)?.failure;
    warnings.push({
      code: 'mcp_unreachable',
      message: failure ? failure.message : `No HTTP response from ${url}: ${connected.error ?? 'unknown error'}`,
    });
  } else if (facts.lastStatus === 401 || facts.lastStatus === 403) {
    await discoverAuthorization(probe, { answer: last!, protocolVersion: connected.protocolVersion ?? LATEST_PROTOCOL_VERSION }, facts);
  } else {
    warnings.push(httpAnswerWarning(guard.records, url, last!));
  }
}

export async function discoverMcpServer(options: DiscoveryOptions): Promise<DiscoveryOutcome> {
  const now = options.now ?? Date.now;
  const remaining = () => Math.max(1, options.deadline - now());
  const guard = createGuardedFetch({
    allowPrivateNetwork: options.allowPrivateNetwork,
    privateAllowlist: options.privateAllowlist,
    resolve: options.resolve,
    deadline: options.deadline,
    now,
    ...options.guard,
  });
  const url = options.url;
  const warnings: McpWarning[] = [];
  const facts: ProbeFacts = {
    url,
    initializeSucceeded: false,
    httpResponded: false,
    challengeScopes: [],
    authorizationServers: [],
    preregisteredClient: preregisteredClientFor(url, options.preregisteredClients ?? {}) !== undefined,
    warnings,
  };
  const probe: Probe = { guard, url, remaining };
  let client: Client | undefined;
  try {
    const connected = await connectWithFallback(probe, warnings);
    client = connected.client;
    if (client) {
      facts.initializeSucceeded = true;
      facts.httpResponded = true;
      facts.protocolVersion = connected.protocolVersion;
      facts.lastStatus = lastEndpointRecord(guard.records, url)?.status;
      await listTools(client, facts, remaining);
    } else {
      await explainFailedConnect(probe, connected, facts);
    }
  } finally {
    await closeQuietly(client);
    await guard.close();
  }
  const initializeRecord = guard.records.find((r) => r.url === url && r.method === 'POST');
  return {
    discovery: decideDiscovery(facts),
    facts,
    connectionReset: !facts.httpResponded && initializeRecord?.failure?.code === 'connection_reset',
    records: guard.records,
  };
}

/** The last request to the MCP endpoint itself (POST or the SSE GET) that got an HTTP status. */
function lastEndpointRecord(records: FetchRecord[], url: string): FetchRecord | undefined {
  const sameEndpoint = records.filter((r) => r.url === url);
  return [...sameEndpoint].reverse().find((r) => r.status !== undefined);
}

async function connect({ guard, url, remaining }: Probe, transportKind: 'streamable' | 'sse'): Promise<Connected> {
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  // Background errors (the standalone SSE stream closing when we leave) are not the probe's business.
  client.onerror = () => undefined;
  const transport =
    transportKind === 'streamable'
      ? new StreamableHTTPClientTransport(new URL(url), {
          fetch: guard.fetch,
          // The guard follows redirects itself, re-validating each hop.
          redirectPolicy: 'follow',
          reconnectionOptions: {
            maxRetries: 0,
            initialReconnectionDelay: 1000,
            maxReconnectionDelay: 1000,
            reconnectionDelayGrowFactor: 1,
          },
        })
      : new SSEClientTransport(new URL(url), { fetch: guard.fetch, redirectPolicy: 'follow' });
  try {
    await client.connect(transport, { timeout: remaining() });
    return { client, protocolVersion: (transport as { protocolVersion?: string }).protocolVersion };
  } catch (error) {
    const protocolVersion = (transport as { protocolVersion?: string }).protocolVersion;
    await closeQuietly(client);
    return { protocolVersion, error: errorMessage(error) };
  }
}

async function listTools(client: Client, facts: ProbeFacts, remaining: () => number): Promise<void> {
  const tools: McpToolItem[] = [];
  let cursor: string | undefined;
  try {
    for (let page = 0; page < MAX_TOOL_PAGES && tools.length < MAX_TOOLS; page++) {
      const result = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: remaining() });
      for (const tool of result.tools) {
        if (tools.length >= MAX_TOOLS) break;
        tools.push(toolItem(tool));
      }
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    facts.tools = tools;
  } catch (error) {
    if (tools.length > 0) facts.tools = tools;
    facts.warnings.push({ code: 'mcp_tools_unavailable', message: `tools/list failed: ${errorMessage(error)}` });
  }
}

type JsonResult = { ok: true; url: string; json: unknown } | { ok: false; url: string; reason: string };

async function fetchJson(guard: GuardedFetch, url: string, protocolVersion: string): Promise<JsonResult> {
  let response: Response;
  try {
    response = await guard.fetch(url, { headers: { accept: 'application/json', 'mcp-protocol-version': protocolVersion } });
  } catch (error) {
    return { ok: false, url, reason: errorMessage(error) };
  }
  if (!response.ok) {
    await response.body?.cancel().catch(() => undefined);
    return { ok: false, url, reason: `HTTP ${response.status}` };
  }
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    return { ok: false, url, reason: errorMessage(error) };
  }
  try {
    return { ok: true, url, json: JSON.parse(text) };
  } catch {
    return { ok: false, url, reason: 'not JSON' };
  }
}

/** RFC 9728 §3.1: the well-known URI is inserted between the host and the resource's path. */
export function protectedResourceMetadataUrls(serverUrl: string, challengeUrl?: string): string[] {
  const server = new URL(serverUrl);
  const urls: string[] = [];
  if (challengeUrl) urls.push(challengeUrl);
  const path = server.pathname.replace(/\/+$/, '');
  if (path !== '') urls.push(`${server.origin}/.well-known/oauth-protected-resource${path}`);
  urls.push(`${server.origin}/.well-known/oauth-protected-resource`);
  return [...new Set(urls)];
}

/** An authorization challenge: the endpoint's 401 or 403, and the protocol version the metadata is asked in. */
interface AuthChallenge {
  answer: FetchRecord;
  protocolVersion: string;
}

async function discoverAuthorization(
  { guard, url }: Pick<Probe, 'guard' | 'url'>,
  { answer: challenge, protocolVersion }: AuthChallenge,
  facts: ProbeFacts,
): Promise<void> {
  const headers = new Headers();
  if (challenge.wwwAuthenticate) headers.set('www-authenticate', challenge.wwwAuthenticate);
  const params = extractWWWAuthenticateParams(new Response(null, { status: challenge.status, headers }));
  facts.challengeScopes = (params.scope ?? '').split(/\s+/).filter(Boolean);

  const failures: string[] = [];
  for (const candidate of protectedResourceMetadataUrls(url, params.resourceMetadataUrl?.href)) {
    const result = await fetchJson(guard, candidate, protocolVersion);
    if (!result.ok) {
      failures.push(`${candidate}: ${result.reason}`);
      continue;
    }
    const parsed = OAuthProtectedResourceMetadataSchema.safeParse(result.json);
    if (!parsed.success) {
      failures.push(`${candidate}: not protected-resource metadata`);
      continue;
    }
    // RFC 9728 §3.3: metadata describing some other resource must not be used (same origin,
    // and the server's path within the resource's path, as the SDK itself checks).
    if (!checkResourceAllowed({ requestedResource: url, configuredResource: parsed.data.resource })) {
      failures.push(`${candidate}: its resource ${parsed.data.resource} does not cover ${url}`);
      continue;
    }
    facts.resourceMetadata = {
      url: candidate,
      resource: parsed.data.resource,
      scopesSupported: parsed.data.scopes_supported ?? [],
      authorizationServers: parsed.data.authorization_servers ?? [],
    };
    break;
  }
  if (!facts.resourceMetadata) {
    facts.warnings.push({
      code: 'oauth_resource_metadata_unavailable',
      message: `No protected-resource metadata (RFC 9728): ${failures.join('; ')}`,
    });
    return;
  }

  for (const issuer of facts.resourceMetadata.authorizationServers.slice(0, MAX_AUTHORIZATION_SERVERS)) {
    const server = await fetchAuthorizationServer(guard, issuer, protocolVersion);
    if ('server' in server) facts.authorizationServers.push(server.server);
    else facts.warnings.push(server.warning);
  }
}

async function fetchAuthorizationServer(
  guard: GuardedFetch,
  issuer: string,
  protocolVersion: string,
): Promise<{ server: McpAuthorizationServer } | { warning: McpWarning }> {
  let urls: string[];
  try {
    urls = buildDiscoveryUrls(issuer).map((u) => u.url.href);
  } catch {
    return { warning: { code: 'oauth_server_metadata_unavailable', message: `Authorization server ${issuer} is not a URL.` } };
  }
  const failures: string[] = [];
  const mismatches: string[] = [];
  for (const candidate of urls) {
    const result = await fetchJson(guard, candidate, protocolVersion);
    if (!result.ok) {
      failures.push(`${candidate}: ${result.reason}`);
      continue;
    }
    const parsed = OAuthMetadataSchema.safeParse(result.json);
    if (!parsed.success) {
      failures.push(`${candidate}: not authorization-server metadata`);
      continue;
    }
    // RFC 8414 §3.3: the issuer in the document must be identical to the advertised one,
    // or a server could impersonate another's endpoints.
    if (parsed.data.issuer !== issuer) {
      mismatches.push(`${candidate} names issuer ${parsed.data.issuer}`);
      continue;
    }
    const m = parsed.data;
    return {
      server: {
        issuer,
        clientIdMetadataDocumentSupported: m.client_id_metadata_document_supported === true,
        authorizationEndpoint: m.authorization_endpoint,
        tokenEndpoint: m.token_endpoint,
        ...(m.registration_endpoint ? { registrationEndpoint: m.registration_endpoint } : {}),
        scopesSupported: m.scopes_supported ?? [],
        grantTypesSupported: m.grant_types_supported ?? [],
        codeChallengeMethodsSupported: m.code_challenge_methods_supported ?? [],
        tokenEndpointAuthMethodsSupported: m.token_endpoint_auth_methods_supported ?? [],
      },
    };
  }
  if (mismatches.length > 0) {
    return {
      warning: {
        code: 'oauth_issuer_mismatch',
        message: `Discarded metadata for ${issuer}: ${mismatches.join('; ')}.`,
      },
    };
  }
  return {
    warning: {
      code: 'oauth_server_metadata_unavailable',
      message: `No authorization-server metadata for ${issuer}: ${failures.join('; ')}`,
    },
  };
}
