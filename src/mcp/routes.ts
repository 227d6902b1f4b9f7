/**
 * POST /v1/mcp-connections/resolve (docs/mcp.md). Thin: validate, plan (pure), run the probe
 * workflow and wait for its answer. No database write, no registration, no credential: the
 * probes run in the worker behind the SSRF guard.
 */
import { randomUUID } from 'node:crypto';
import { defineRoute, type Route } from '../app/http/route';
import type { ApiDeps } from '../app/feature';
import { authResponses } from '../app/http/schemas';
import { mcpResolveWorkflow, mcpResolveWorkflowId, mcpTaskQueue, type McpResolveInput, type McpResolveResult } from './contract';
import { planResolve } from './candidates';
import { INVALID_QUERY_REASON } from './classify';
import { InvalidRequestError, Unavailable } from '../app/http/schemas';
import { ResolveRequest, ResolveResponse } from './schemas';
import type { McpSettings } from './settings';

/** Waiting beyond the probes' own bound (timeout + retry room) means Temporal or the worker is not there. */
const WAIT_SLACK_MS = 4_000;

export function createMcpRoutes({ settings, platform, ingress }: Pick<ApiDeps<McpSettings>, 'settings' | 'platform' | 'ingress'>): Route[] {
  const taskQueue = platform.taskQueue;
  const resolve = defineRoute({
    method: 'post',
    path: '/v1/mcp-connections/resolve',
    summary: 'Resolve a URL, host or product name to an MCP server and what connecting to it requires',
    description:
      'Admins only. Curated presets are matched first; otherwise at most five well-known endpoint candidates are probed ' +
      'concurrently through an SSRF-guarded fetch (8 s each). No side effects: nothing is registered, stored or created.',
    tags: ['Connectors'],
    auth: 'admin',
    body: { kind: 'json', schema: ResolveRequest, limitBytes: 16 * 1024 },
    responses: {
      200: { description: '`preset`, `discovered` or `not_found` (with a reason).', schema: ResolveResponse },
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
        ...(plan.preset ? { preset: plan.preset } : {}),
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

  return [resolve];
}
