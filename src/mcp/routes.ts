/**
 * The MCP routes (docs/mcp.md). `POST /v1/mcp-connections/resolve` is thin: validate, plan (pure),
 * run the probe workflow and wait for its answer. No database write, no registration, no
 * credential: the probes run in the worker behind the SSRF guard. `GET /v1/mcp-connections/presets`
 * lists the curated presets, the same answer for every member, with an ETag.
 */
import { randomUUID } from 'node:crypto';
import { defineRoute, type Route } from '../app/http/route';
import type { ApiDeps } from '../app/feature';
import { entityTag, notModified } from '../app/http/conditional';
import { authResponses } from '../app/http/schemas';
import { mcpResolveWorkflow, mcpResolveWorkflowId, mcpTaskQueue, type McpResolveInput, type McpResolveResult } from './contract';
import { planResolve } from './candidates';
import { INVALID_QUERY_REASON } from './classify';
import { presetCatalog } from './presets';
import { InvalidRequestError, Unavailable } from '../app/http/schemas';
import {
  PresetCatalogRequestHeaders,
  PresetCatalogResponse,
  PresetCatalogResponseHeaders,
  ResolveRequest,
  ResolveResponse,
} from './schemas';
import type { McpSettings } from './settings';

/** Waiting beyond the probes' own bound (timeout + retry room) means Temporal or the worker is not there. */
const WAIT_SLACK_MS = 4_000;

type RouteDeps = Pick<ApiDeps<McpSettings>, 'settings' | 'platform' | 'ingress'>;

export function createMcpRoutes(deps: RouteDeps): Route[] {
  return [resolveRoute(deps), presetsRoute(deps.settings)];
}

function resolveRoute({ settings, platform, ingress }: RouteDeps): Route {
  const taskQueue = platform.taskQueue;
  return defineRoute({
    method: 'post',
    path: '/v1/mcp-connections/resolve',
    summary: 'Resolve a URL, host or product name to an MCP server and what connecting to it requires',
    description:
      'Admins only. Curated presets are matched first (by id or name, by the host of their URL, or by a product domain such as ' +
      'github.com and its subdomains), and only the preset URL is probed; otherwise at most five well-known endpoint candidates ' +
      'are probed concurrently through an SSRF-guarded fetch (8 s each). No side effects: nothing is registered, stored or created.',
    tags: ['Connectors'],
    auth: 'admin',
    body: { kind: 'json', schema: ResolveRequest, limitBytes: 16 * 1024 },
    responses: {
      200: {
        description: '`preset` (with a `reason` saying how it matched), `discovered` or `not_found` (with a reason).',
        schema: ResolveResponse,
      },
      400: { description: 'InvalidRequestError: the body is not `{query}` with 1 to 200 characters.', schema: InvalidRequestError },
      ...authResponses,
      503: { description: 'Temporal or the worker is unavailable; retry later.', schema: Unavailable },
    },
    handler: async ({ body, principal }) => {
      const plan = planResolve(body.query, settings.preregisteredClients);
      if (plan.kind === 'invalid') {
        return { status: 200, body: { resolution: 'not_found', attempted: [], reason: INVALID_QUERY_REASON } satisfies McpResolveResult };
      }
      const input: McpResolveInput = {
        query: body.query,
        candidates: plan.candidates,
        ...(plan.preset ? { preset: plan.preset, presetMatch: plan.presetMatch } : {}),
        probeTimeoutMs: settings.probeTimeoutMs,
      };
      const result = await ingress.execute({
        workflow: mcpResolveWorkflow,
        id: mcpResolveWorkflowId(randomUUID()),
        args: [input],
        // Its own queue, but the organization's fair share all the same (probes are admin-only and rare, so no admission).
        taskQueue: mcpTaskQueue(taskQueue),
        tenancy: { tenant: principal.organizationId, admission: 'bypass' },
        timeoutMs: settings.probeTimeoutMs + WAIT_SLACK_MS,
      });
      return { status: 200, body: result };
    },
  });
}

/**
 * The catalogue depends only on the code and the process's settings, so it and its ETag are made
 * once. Screens poll it: a client that sends the ETag back gets a 304 without a body until a
 * release changes the presets or the deployment changes its pre-registered OAuth clients.
 */
function presetsRoute(settings: McpSettings): Route {
  const catalog = { presets: presetCatalog(settings.preregisteredClients) };
  const etag = entityTag(JSON.stringify(catalog));
  const headers = { etag, 'cache-control': 'private, no-cache' };
  return defineRoute({
    method: 'get',
    path: '/v1/mcp-connections/presets',
    summary: 'List the curated MCP presets an add-connection screen shows',
    description:
      'An addition to the interface spec, which has no such route. Any member, by API key or session. Every preset in a stable ' +
      'order, each shaped as resolve shows it, with the product domains a query can name it by and the vendor docs page when ' +
      'there is one; pre-registered OAuth clients (MCP_PREREGISTERED_OAUTH_CLIENTS) applied as in resolve. Send the ETag back ' +
      'in If-None-Match: while the catalogue is unchanged the answer is 304 without a body.',
    tags: ['Connectors'],
    auth: 'authenticated',
    headers: PresetCatalogRequestHeaders,
    responses: {
      200: { description: 'The catalogue.', schema: PresetCatalogResponse, headers: PresetCatalogResponseHeaders },
      304: {
        description: 'If-None-Match names the current ETag: the catalogue the client holds is current.',
        headers: PresetCatalogResponseHeaders,
      },
      401: authResponses[401],
    },
    handler: async ({ headers: request }) =>
      notModified(request['if-none-match'], etag) ? { status: 304, headers } : { status: 200, headers, body: catalog },
  });
}
