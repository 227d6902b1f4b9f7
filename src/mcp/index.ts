/** MCP resolve: presets first, then a bounded, SSRF-guarded probe workflow. */
import path from 'node:path';
import { defineFeature } from '../app/feature';
import { createMcpActivities } from '../../activities/mcp';
import { mcpTaskQueue } from './contract';
import type { McpNetworkOverrides } from './network';
import { createMcpRoutes } from './routes';
import { mcpSettings } from './settings';

export type { McpNetworkOverrides } from './network';

export function createMcpFeature(options: { network?: McpNetworkOverrides } = {}) {
  return defineFeature({
    name: 'mcp',
    settings: mcpSettings,
    workflows: path.join(__dirname, '..', '..', 'workflows', 'mcp'),
    // Probes poll a queue of their own, so a backlog of deliveries or runs never makes an
    // interactive probe wait in line and time out.
    taskQueues: (mainQueue) => [mcpTaskQueue(mainQueue)],
    routes: (deps) => createMcpRoutes(deps),
    activities: (deps) => createMcpActivities({ ...deps, mcpNetwork: options.network }),
  });
}
