/**
 * MCP resolve: a short probe workflow per request, workflows/mcp.ts, and its one
 * activity. Deterministic.
 */

import { workflowRef } from '../app/temporal/contract';
import type { McpResolveInput, McpResolveResponse } from './types';

/** One resolve's probe workflow (workflows/mcp.ts). */
export const mcpResolveWorkflow = workflowRef<[McpResolveInput], McpResolveResponse>('mcpResolve');

/**
 * MCP resolve runs on a task queue of its own, polled by every worker process beside the main
 * one: an admin waits on the answer, so a backlog of deliveries must not make probes queue.
 */
export function mcpTaskQueue(mainTaskQueue: string): string {
  return `${mainTaskQueue}.mcp`;
}

export function mcpResolveWorkflowId(requestId: string): string {
  return `mcp-resolve/${requestId}`;
}

/** The payload types are defined with the feature (src/mcp/types.ts), once, and re-exported here. */
export type { McpResolveInput, McpResolveResponse as McpResolveResult, McpProbeInput, McpProbeResult } from './types';

/** Failure type of a probe attempt that died on a connection reset: the only retried failure. */
export const MCP_CONNECTION_RESET = 'McpConnectionReset';
