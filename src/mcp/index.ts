/** MCP resolve: presets first, then a bounded, SSRF-guarded probe workflow. */
import { defineFeature } from '../app/feature';
import { mcpTaskQueue } from './contract';
import { createMcpRoutes } from './routes';
import { mcpSettings } from './settings';

export type { McpNetworkOverrides } from './network';

export const mcpFeature = defineFeature({
  name: 'mcp',
  settings: mcpSettings,
  // Probes poll a queue of their own, so a backlog of deliveries or runs never makes an
  // interactive probe wait in line and time out.
  taskQueues: (mainQueue) => [mcpTaskQueue(mainQueue)],
  routes: (deps) => createMcpRoutes(deps),
});
