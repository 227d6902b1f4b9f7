/**
 * The MCP resolve request and answer, and the preset catalogue, as zod: the request schemas validate
 * the body and headers; the response schemas document the answers in the OpenAPI document (they
 * mirror src/mcp/types.ts).
 */
import { z } from '../app/http/zod';
import {
  AUTH_TYPES,
  AUTHENTICATION_KINDS,
  DISCOVERY_STATUSES,
  INITIALIZE_OUTCOMES,
  MANUAL_REQUIREMENT_CODES,
  REFRESH_SUPPORT,
  REGISTRATION_METHODS,
  RESOLUTIONS,
  TOOL_VISIBILITIES,
} from './types';

const QUERY_MAX_LENGTH = 200;

export const ResolveRequest = z
  .object({
    query: z.string().min(1).max(QUERY_MAX_LENGTH).openapi({ description: 'A URL, a bare host or a product name.', example: 'notion' }),
  })
  .openapi('McpResolveRequest');

const AuthTypeSchema = z.enum(AUTH_TYPES);

const PresetSchema = z
  .object({
    presetId: z.string(),
    displayName: z.string(),
    description: z.string(),
    url: z.string(),
    authType: AuthTypeSchema,
    supportedAuthTypes: z.array(AuthTypeSchema),
    requiresOAuthClient: z.boolean(),
    defaultOAuthClientId: z.string().optional(),
    authorizationServerIssuer: z.string().optional(),
    defaultOAuthScopes: z.array(z.string()),
    domains: z.array(z.string()).openapi({
      description: 'The domains the product is known by: a query naming one of them, or a subdomain of one, matches this preset.',
      example: ['github.com'],
    }),
    docsUrl: z.string().optional().openapi({ description: "The vendor's page about its MCP server." }),
  })
  .openapi('McpPreset');

/** `GET /v1/mcp-connections/presets`: the catalogue, in its stable order. */
export const PresetCatalogResponse = z.object({ presets: z.array(PresetSchema) }).openapi('McpPresetCatalog');

export const PresetCatalogRequestHeaders = z.object({
  'if-none-match': z
    .string()
    .optional()
    .openapi({ description: 'The `ETag` of a catalogue the client holds: when it is still current the answer is 304.' }),
});

export const PresetCatalogResponseHeaders = z.object({
  ETag: z.string().openapi({ description: 'Changes when the catalogue or MCP_PREREGISTERED_OAUTH_CLIENTS do.' }),
  'Cache-Control': z.string().openapi({ description: '`private, no-cache`: keep it, and ask again with `If-None-Match`.' }),
});

const AuthorizationServer = z.object({
  issuer: z.string(),
  clientIdMetadataDocumentSupported: z.boolean(),
  authorizationEndpoint: z.string(),
  tokenEndpoint: z.string(),
  registrationEndpoint: z.string().optional(),
  scopesSupported: z.array(z.string()),
  grantTypesSupported: z.array(z.string()),
  codeChallengeMethodsSupported: z.array(z.string()),
  tokenEndpointAuthMethodsSupported: z.array(z.string()),
});

const DiscoverySchema = z
  .object({
    status: z.enum(DISCOVERY_STATUSES),
    server: z.object({ url: z.string(), initialize: z.enum(INITIALIZE_OUTCOMES), protocolVersion: z.string().optional() }),
    authentication: z.object({
      kind: z.enum(AUTHENTICATION_KINDS),
      authorizationServers: z.array(AuthorizationServer),
      requiredScopes: z.array(z.string()),
      recommendedScopes: z.array(z.string()),
      refreshSupport: z.enum(REFRESH_SUPPORT),
      availableRegistrationMethods: z.array(z.enum(REGISTRATION_METHODS)),
      recommendedRegistrationMethod: z.enum(REGISTRATION_METHODS),
      resource: z.string().optional(),
      protectedResourceMetadataUrl: z.string().optional(),
    }),
    tools: z.object({
      visibility: z.enum(TOOL_VISIBILITIES),
      count: z.number().int(),
      items: z.array(z.object({ name: z.string(), readOnlyHint: z.boolean(), destructiveHint: z.boolean(), openWorldHint: z.boolean() })),
    }),
    manualRequirements: z.array(
      z.object({ code: z.enum(MANUAL_REQUIREMENT_CODES), label: z.string(), reason: z.string(), required: z.boolean() }),
    ),
    warnings: z.array(
      z.object({
        code: z.string().openapi({
          description:
            'mcp_http_<status>, mcp_unreachable, mcp_tools_unavailable, legacy_sse_transport, oauth_resource_metadata_unavailable, oauth_server_metadata_unavailable, oauth_issuer_mismatch',
        }),
        message: z.string(),
      }),
    ),
  })
  .openapi('McpDiscovery');

export const ResolveResponse = z
  .object({
    resolution: z.enum(RESOLUTIONS),
    attempted: z.array(z.string()).openapi({ description: 'Every endpoint candidate that was probed, in order.' }),
    reason: z.string().optional(),
    preset: PresetSchema.optional(),
    match: z.object({ url: z.string(), suggestedName: z.string(), discovery: DiscoverySchema }).optional(),
  })
  .openapi('McpResolveResponse');
