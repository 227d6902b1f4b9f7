/**
 * MCP resolve's probe workflow (docs/mcp.md): one activity per candidate, all at once, each
 * bounded. The route waits for the result, so the whole thing stays within ~10 s even when
 * every candidate hangs: start-to-close is MCP_PROBE_TIMEOUT (8 s), and schedule-to-close
 * leaves room for at most one quick retry after a connection reset.
 */
import { ActivityFailure, ApplicationFailure, proxyActivities, TimeoutFailure } from '@temporalio/workflow';
import type { McpActivities } from '../activities/mcp';
import { assembleResponse } from '../src/mcp/resolution';
import { unreachableDiscovery } from '../src/mcp/decide';
import { MCP_CONNECTION_RESET, type McpProbeResult, type McpResolveInput, type McpResolveResult } from '../src/mcp/contract';
import { implementsWorkflow } from '../src/app/temporal/contract';
import { mcpResolveWorkflow } from '../src/mcp/contract';

/** Slack between one probe's timeout and the probe's schedule-to-close. */
const RETRY_ROOM_MS = 1_500;

function whyFailed(error: unknown): string {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  if (cause instanceof TimeoutFailure) return 'The probe timed out.';
  if (cause instanceof ApplicationFailure && cause.type === MCP_CONNECTION_RESET) return 'The connection was reset, twice.';
  return `The probe failed: ${(cause as Error)?.message ?? 'unknown error'}`;
}

export async function mcpResolve(input: McpResolveInput): Promise<McpResolveResult> {
  const { probeMcpCandidate } = proxyActivities<McpActivities>({
    startToCloseTimeout: input.probeTimeoutMs,
    scheduleToCloseTimeout: input.probeTimeoutMs + RETRY_ROOM_MS,
    retry: {
      // Only a connection reset is thrown as retryable; every other outcome is returned as a
      // definite answer, so this is "one retry at most, for a reset".
      maximumAttempts: 2,
      initialInterval: '100ms',
      backoffCoefficient: 1,
    },
  });
  const probes: McpProbeResult[] = await Promise.all(
    input.candidates.map((candidate) =>
      probeMcpCandidate({ url: candidate.url, source: candidate.source }).catch((error: unknown): McpProbeResult => ({
        url: candidate.url,
        discovery: unreachableDiscovery(candidate.url, whyFailed(error)),
      })),
    ),
  );
  return assembleResponse(input, probes);
}

implementsWorkflow(mcpResolveWorkflow, mcpResolve);
