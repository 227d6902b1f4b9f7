/**
 * MCP resolve's one activity: probe one candidate URL. It runs in the worker, so the SSRF
 * guard's settings (MCP_ALLOW_PRIVATE_NETWORK, MCP_PRIVATE_ALLOWLIST) are read here, from the
 * worker's config. No database access and no writes anywhere: resolve has no side effects.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { discoverMcpServer } from '../src/mcp/discovery';
import { logRefusalDetails } from '../src/mcp/ssrf/address-refusal';
import type { HostResolver } from '../src/mcp/ssrf/guarded-fetch';
import { MCP_CONNECTION_RESET, type McpProbeInput, type McpProbeResult } from '../src/mcp/contract';
import type { WorkerDeps } from '../src/app/feature';
import type { McpNetworkOverrides } from '../src/mcp/network';
import type { McpSettings } from '../src/mcp/settings';

/** MCP_DNS=off: every host name is unresolvable, as it would be on a machine without DNS. */
const refuseDns: HostResolver = async (hostname) => {
  throw Object.assign(new Error(`DNS is off (MCP_DNS=off): ${hostname} not resolved`), { code: 'ENOTFOUND' });
};

/** Time kept back from the activity's own timeouts, so the probe answers before Temporal gives up. */
const SAFETY_MARGIN_MS = 400;

export function createMcpActivities(deps: Pick<WorkerDeps<McpSettings>, 'settings' | 'log'> & { mcpNetwork?: McpNetworkOverrides }) {
  return {
    async probeMcpCandidate(input: McpProbeInput): Promise<McpProbeResult> {
      const info = Context.current().info;
      const startedAt = Date.now();
      const bounds = [startedAt + deps.settings.probeTimeoutMs];
      if (info.startToCloseTimeoutMs > 0) bounds.push(startedAt + info.startToCloseTimeoutMs);
      if (info.scheduleToCloseTimeoutMs > 0) bounds.push(info.scheduledTimestampMs + info.scheduleToCloseTimeoutMs);
      const deadline = Math.max(startedAt + 100, Math.min(...bounds) - SAFETY_MARGIN_MS);
      let outcome;
      try {
        outcome = await discoverMcpServer({
          url: input.url,
          deadline,
          allowPrivateNetwork: deps.settings.allowPrivateNetwork,
          privateAllowlist: deps.settings.privateAllowlist,
          preregisteredClients: deps.settings.preregisteredClients,
          resolve: deps.mcpNetwork?.resolve ?? (deps.settings.dns === 'off' ? refuseDns : undefined),
          guard: deps.mcpNetwork?.guard,
        });
      } catch (error) {
        // A bug, not an answer about the server: retrying would not change it.
        throw ApplicationFailure.nonRetryable(
          `probe of ${input.url} failed: ${(error as Error)?.message ?? String(error)}`,
          'McpProbeError',
        );
      }
      logRefusalDetails(deps.log, input.url, outcome.records);
      deps.log.debug(
        {
          url: input.url,
          status: outcome.discovery.status,
          requests: outcome.records.map((r) => ({ hops: r.hops, status: r.status, failure: r.failure?.code })),
        },
        'mcp probe finished',
      );
      // A reset connection is the one transient failure worth a second try (the workflow's
      // retry policy allows exactly one). Everything else is a definite answer.
      if (outcome.connectionReset && info.attempt < 2) {
        throw ApplicationFailure.retryable(`connection to ${input.url} was reset`, MCP_CONNECTION_RESET);
      }
      return { url: input.url, discovery: outcome.discovery };
    },
  };
}

/** The activities as the feature's workflow proxies them. */
export type McpActivities = ReturnType<typeof createMcpActivities>;
