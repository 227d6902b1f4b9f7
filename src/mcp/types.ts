/**
 * The shapes of MCP resolve. Types only: the route, the workflow and the activity all use
 * them, and `src/mcp/contract.ts` re-exports them as payload types. Enum values beyond the
 * interface spec's examples are this service's own.
 */

export const AUTH_TYPES = ['oauth', 'apikey', 'none'] as const;
type AuthType = (typeof AUTH_TYPES)[number];

/**
 * A preset: a curated MCP server a query matches by id, name, the host of its URL or one of its
 * domains; then only its URL is probed. Optional strings are left out when a preset has none.
 */
export interface McpPreset {
  presetId: string;
  displayName: string;
  description: string;
  url: string;
  authType: AuthType;
  supportedAuthTypes: AuthType[];
  requiresOAuthClient: boolean;
  defaultOAuthClientId?: string;
  authorizationServerIssuer?: string;
  defaultOAuthScopes: string[];
  /** The domains people name the product by: a query naming one of them, or a subdomain of one, matches the preset. */
  domains: string[];
  /** The vendor's page about its MCP server, when there is one. */
  docsUrl?: string;
}

/** How a query matched its preset: by id or display name, by the host of the preset's URL, or by one of its domains. */
export type PresetMatch = { by: 'name' } | { by: 'host'; host: string } | { by: 'domain'; domain: string };

export const RESOLUTIONS = ['preset', 'discovered', 'not_found'] as const;
type Resolution = (typeof RESOLUTIONS)[number];

export const DISCOVERY_STATUSES = ['ready', 'manual_action_required', 'unreachable', 'unsupported'] as const;
export type DiscoveryStatus = (typeof DISCOVERY_STATUSES)[number];

export const INITIALIZE_OUTCOMES = ['succeeded', 'authentication_required', 'failed'] as const;
export type InitializeOutcome = (typeof INITIALIZE_OUTCOMES)[number];

export const AUTHENTICATION_KINDS = ['none', 'oauth', 'manual_bearer', 'unknown'] as const;
export type AuthenticationKind = (typeof AUTHENTICATION_KINDS)[number];

export const REFRESH_SUPPORT = ['supported', 'not_advertised', 'unknown'] as const;
export type RefreshSupport = (typeof REFRESH_SUPPORT)[number];

export const REGISTRATION_METHODS = ['client_metadata', 'pre_registered', 'dynamic'] as const;
export type RegistrationMethod = (typeof REGISTRATION_METHODS)[number];

export const TOOL_VISIBILITIES = ['available_without_auth', 'requires_auth', 'unavailable'] as const;
export type ToolVisibility = (typeof TOOL_VISIBILITIES)[number];

export const MANUAL_REQUIREMENT_CODES = [
  'provider_access',
  'network_trust',
  'authorization_server_selection',
  'oauth_client_registration',
] as const;
type ManualRequirementCode = (typeof MANUAL_REQUIREMENT_CODES)[number];

export interface McpAuthorizationServer {
  issuer: string;
  clientIdMetadataDocumentSupported: boolean;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  registrationEndpoint?: string;
  scopesSupported: string[];
  grantTypesSupported: string[];
  codeChallengeMethodsSupported: string[];
  tokenEndpointAuthMethodsSupported: string[];
}

export interface McpToolItem {
  name: string;
  readOnlyHint: boolean;
  destructiveHint: boolean;
  openWorldHint: boolean;
}

export interface McpManualRequirement {
  code: ManualRequirementCode;
  label: string;
  reason: string;
  required: boolean;
}

/** A probe's non-fatal finding: `mcp_http_<status>`, `mcp_unreachable`, `legacy_sse_transport`, `mcp_tools_unavailable`, `oauth_*`. */
export interface McpWarning {
  code: string;
  message: string;
}

/** What a probe found out about one candidate server. Complete even when the probe failed: `status` says why. */
export interface McpDiscovery {
  status: DiscoveryStatus;
  server: { url: string; initialize: InitializeOutcome; protocolVersion?: string };
  authentication: {
    kind: AuthenticationKind;
    authorizationServers: McpAuthorizationServer[];
    requiredScopes: string[];
    recommendedScopes: string[];
    refreshSupport: RefreshSupport;
    availableRegistrationMethods: RegistrationMethod[];
    recommendedRegistrationMethod: RegistrationMethod;
    resource?: string;
    protectedResourceMetadataUrl?: string;
  };
  tools: { visibility: ToolVisibility; count: number; items: McpToolItem[] };
  manualRequirements: McpManualRequirement[];
  warnings: McpWarning[];
}

interface McpMatch {
  url: string;
  suggestedName: string;
  discovery: McpDiscovery;
}

/** The resolve answer. `preset` only for `resolution: preset`; `match` only when a probe qualified. */
export interface McpResolveResponse {
  resolution: Resolution;
  attempted: string[];
  reason?: string;
  preset?: McpPreset;
  match?: McpMatch;
}

/** Where a candidate came from. Name-guessed candidates never qualify on `manual_bearer` alone. */
export type CandidateSource = 'preset' | 'url' | 'domain' | 'name';

export interface McpCandidate {
  url: string;
  source: CandidateSource;
  /** Computed up front (pure URL work) so the workflow needs no URL parsing. */
  suggestedName: string;
}

/** The probe workflow's input: everything decided up front by the route (pure work). */
export interface McpResolveInput {
  query: string;
  candidates: McpCandidate[];
  preset?: McpPreset;
  /** How the query matched `preset`; absent in inputs recorded before it was added. */
  presetMatch?: PresetMatch;
  /** Start-to-close of each probe activity (MCP_PROBE_TIMEOUT). */
  probeTimeoutMs: number;
}

/** One probe activity: one candidate URL. */
export interface McpProbeInput {
  url: string;
  source: CandidateSource;
}

export interface McpProbeResult {
  url: string;
  discovery: McpDiscovery;
}
