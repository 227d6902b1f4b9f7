import type { Route } from './http/route';

/**
 * What a feature's factory (`createSlackFeature(deps)`, …) gives the composition root. Its
 * workflows and activities are registered by the worker (workflows/index.ts, activities/index.ts),
 * its CLI commands by src/cli/den.ts.
 */
export interface Feature {
  name: string;
  routes: Route[];
}
