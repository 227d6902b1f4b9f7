/** Automation runs (spec 4.3, 4.4): one actor workflow per run; events, heartbeats, reads. */
import type { Feature } from '../app/feature';
import type { RunDeps } from './deps';
import { createRunRoutes } from './routes';

export { runSearchAttributes } from './contract';
export { sweepStaleRuns } from './reconcile';

export function createRunsFeature(deps: RunDeps): Feature {
  return { name: 'runs', routes: createRunRoutes(deps) };
}
