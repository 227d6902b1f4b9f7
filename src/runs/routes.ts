import type { RouteDefinition } from '../http/route';

// Filled in by the feature.
export const runRoutes: RouteDefinition[] = [];
