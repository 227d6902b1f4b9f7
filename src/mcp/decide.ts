/**
 * The enum decisions of a discovery, as pure
 * functions of the facts a probe collected. No I/O, no URL parsing, no clock: the workflow
 * imports this module too (deterministic code only).
 */
import type {
  AuthenticationKind,
  CandidateSource,
  DiscoveryStatus,
  InitializeOutcome,
  McpAuthorizationServer,
  McpDiscovery,
  McpManualRequirement,
  McpToolItem,
  McpWarning,
  RefreshSupport,
  RegistrationMethod,
  ToolVisibility,
} from './types';

/** What one probe of one candidate found out. Everything the enums depend on, nothing more. */
export interface ProbeFacts {
  url: string;
  /** The initialize request returned a result. */
  initializeSucceeded: boolean;
  protocolVersion?: string;
  /** False when no HTTP response came at all (refused by the guard, DNS, connect, reset, timeout). */
  httpResponded: boolean;
  /** Status of the last HTTP response of the MCP endpoint. */
  lastStatus?: number;
  /** Listed tools; undefined when tools/list was not reached or failed. */
  tools?: McpToolItem[];
  /** The challenge's `scope`, split on spaces. */
  challengeScopes: string[];
  resourceMetadata?: { url: string; resource?: string; scopesSupported: string[]; authorizationServers: string[] };
  /** Authorization servers whose metadata was fetched and whose issuer matched. */
  authorizationServers: McpAuthorizationServer[];
  /** MCP_PREREGISTERED_OAUTH_CLIENTS has a client for this server URL. */
  preregisteredClient: boolean;
  warnings: McpWarning[];
}

const authenticationRequired = (f: Pick<ProbeFacts, 'lastStatus' | 'initializeSucceeded'>) =>
  !f.initializeSucceeded && (f.lastStatus === 401 || f.lastStatus === 403);

function decideInitialize(f: ProbeFacts): InitializeOutcome {
  if (f.initializeSucceeded) return 'succeeded';
  if (authenticationRequired(f)) return 'authentication_required';
  return 'failed';
}

function decideKind(f: ProbeFacts): AuthenticationKind {
  if (f.initializeSucceeded) return 'none';
  if (f.resourceMetadata || f.authorizationServers.length > 0) return 'oauth';
  if (authenticationRequired(f)) return 'manual_bearer';
  return 'unknown';
}

function decideRefreshSupport(servers: McpAuthorizationServer[]): RefreshSupport {
  if (servers.some((s) => s.grantTypesSupported.includes('refresh_token'))) return 'supported';
  return servers.length > 0 ? 'not_advertised' : 'unknown';
}

function decideRegistrationMethods(servers: McpAuthorizationServer[]): {
  available: RegistrationMethod[];
  recommended: RegistrationMethod;
} {
  const clientMetadata = servers.some((s) => s.clientIdMetadataDocumentSupported);
  const dynamic = servers.some((s) => s.registrationEndpoint !== undefined);
  const available: RegistrationMethod[] = [];
  if (clientMetadata) available.push('client_metadata');
  available.push('pre_registered');
  if (dynamic) available.push('dynamic');
  const recommended: RegistrationMethod = clientMetadata ? 'client_metadata' : dynamic ? 'dynamic' : 'pre_registered';
  return { available, recommended };
}

function decideScopes(f: ProbeFacts, refresh: RefreshSupport): { required: string[]; recommended: string[] } {
  const required = [...f.challengeScopes];
  const recommended = required.length > 0 ? [...required] : [...(f.resourceMetadata?.scopesSupported ?? [])];
  if (
    refresh === 'supported' &&
    f.authorizationServers.some((s) => s.scopesSupported.includes('offline_access')) &&
    !recommended.includes('offline_access')
  ) {
    recommended.push('offline_access');
  }
  return { required, recommended };
}

function decideManualRequirements(f: ProbeFacts): McpManualRequirement[] {
  const requirements: McpManualRequirement[] = [
    {
      code: 'provider_access',
      label: 'Provider access',
      reason: 'Members need an account with this provider that is allowed to use its MCP server.',
      required: false,
    },
    {
      code: 'network_trust',
      label: 'Network trust',
      reason: 'Tool calls send data to this server; confirm that your organization trusts it.',
      required: false,
    },
  ];
  if (f.authorizationServers.length > 1) {
    requirements.push({
      code: 'authorization_server_selection',
      label: 'Choose an authorization server',
      reason: `The server advertises ${f.authorizationServers.length} authorization servers; pick the one your organization uses.`,
      required: true,
    });
  }
  if (authenticationRequired(f)) {
    const selfService = f.authorizationServers.some((s) => s.clientIdMetadataDocumentSupported || s.registrationEndpoint !== undefined);
    requirements.push({
      code: 'oauth_client_registration',
      label: 'OAuth client registration',
      reason: f.preregisteredClient
        ? 'A pre-registered OAuth client is configured for this server.'
        : selfService
          ? 'The authorization server registers clients by itself (client metadata document or dynamic registration).'
          : 'No authorization server offers client metadata documents or dynamic registration: register an OAuth client with the provider and configure its client id.',
      required: !selfService && !f.preregisteredClient,
    });
  }
  return requirements;
}

function decideToolVisibility(f: ProbeFacts): ToolVisibility {
  if (f.initializeSucceeded && f.tools !== undefined) return 'available_without_auth';
  if (authenticationRequired(f)) return 'requires_auth';
  return 'unavailable';
}

function decideStatus(f: ProbeFacts, kind: AuthenticationKind, requirements: McpManualRequirement[]): DiscoveryStatus {
  if (f.initializeSucceeded) return 'ready';
  if (!f.httpResponded) return 'unreachable';
  if (kind === 'oauth' && !requirements.some((r) => r.required)) return 'ready';
  if (authenticationRequired(f)) return 'manual_action_required';
  return 'unsupported';
}

/** The complete discovery object for one candidate. */
export function decideDiscovery(f: ProbeFacts): McpDiscovery {
  const kind = decideKind(f);
  const refreshSupport = decideRefreshSupport(f.authorizationServers);
  const scopes = decideScopes(f, refreshSupport);
  const registration = decideRegistrationMethods(f.authorizationServers);
  const manualRequirements = decideManualRequirements(f);
  const tools = f.initializeSucceeded && f.tools ? f.tools : [];
  return {
    status: decideStatus(f, kind, manualRequirements),
    server: {
      url: f.url,
      initialize: decideInitialize(f),
      ...(f.protocolVersion !== undefined ? { protocolVersion: f.protocolVersion } : {}),
    },
    authentication: {
      kind,
      authorizationServers: f.authorizationServers,
      requiredScopes: scopes.required,
      recommendedScopes: scopes.recommended,
      refreshSupport,
      availableRegistrationMethods: registration.available,
      recommendedRegistrationMethod: registration.recommended,
      ...(f.resourceMetadata?.resource !== undefined ? { resource: f.resourceMetadata.resource } : {}),
      ...(f.resourceMetadata ? { protectedResourceMetadataUrl: f.resourceMetadata.url } : {}),
    },
    tools: { visibility: decideToolVisibility(f), count: tools.length, items: tools },
    manualRequirements,
    warnings: f.warnings,
  };
}

/** A probe that produced no facts of its own (the activity failed or timed out). */
export function unreachableDiscovery(url: string, message: string, preregisteredClient = false): McpDiscovery {
  return decideDiscovery({
    url,
    initializeSucceeded: false,
    httpResponded: false,
    challengeScopes: [],
    authorizationServers: [],
    preregisteredClient,
    warnings: [{ code: 'mcp_unreachable', message }],
  });
}

/** A candidate qualifies when any of these holds; the first qualifying one in candidate order is the match. */
export function qualifies(discovery: McpDiscovery, source: CandidateSource): boolean {
  const { initialize } = discovery.server;
  const { kind } = discovery.authentication;
  if (initialize === 'succeeded') return true;
  if (discovery.status === 'ready' && kind === 'oauth') return true;
  if (initialize === 'authentication_required' && kind === 'oauth') return true;
  if (kind === 'manual_bearer' && source !== 'name') return true;
  return false;
}

/** One line about why a candidate did not qualify, for `reason`. */
export function describeOutcome(discovery: McpDiscovery): string {
  const first = discovery.warnings[0];
  return first ? `${discovery.status}: ${first.message}` : discovery.status;
}
