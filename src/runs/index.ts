/** Automation runs: one actor workflow per run; events, heartbeats, reads. */
import { defineFeature } from '../app/feature';
import { runSearchAttributes } from './contract';
import { sweepStaleRuns } from './reconcile';
import { createRunRoutes } from './routes';
import { runsSettings } from './settings';

export { runDefaults } from './settings';
export { acceptCancel } from './cancel';
// For the features that answer a member before a run starts (Slack): whether one of their runtimes
// is online, and whether their breaker lets a run start (the half-open probe included).
export { runnerSettings } from './runner-settings';
export { lastRuntimeSeenAt, runtimeOnline } from './presence';
// For the features that show a member their recent runs (Slack's Home tab).
export { listRuns } from './store';
export { memberBreaker, startRunUnderBreaker, type MemberBreaker } from './breaker-store';

/** How often a worker process reconciles runs that ended outside their own logic. */
const RUN_SWEEP_INTERVAL_MS = 60_000;

export const runsFeature = defineFeature({
  name: 'runs',
  settings: runsSettings,
  searchAttributes: Object.values(runSearchAttributes),
  routes: (deps) => createRunRoutes(deps),
  sweeps: [
    {
      name: 'stale runs',
      intervalMs: RUN_SWEEP_INTERVAL_MS,
      run: async (deps, now) => {
        const closed = await sweepStaleRuns(deps, now);
        if (closed > 0) deps.log.warn({ closed }, 'closed the rows of runs that ended outside their own logic');
      },
    },
  ],
});
