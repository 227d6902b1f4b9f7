/** MCP resolve: presets first, then a bounded, SSRF-guarded probe workflow. */
import type { Feature } from '../app/feature';
import { createMcpRoutes } from './routes';

export function createMcpFeature(deps: Parameters<typeof createMcpRoutes>[0]): Feature {
  return { name: 'mcp', routes: createMcpRoutes(deps) };
}
