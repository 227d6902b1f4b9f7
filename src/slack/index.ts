/** Slack: signed events and slash commands, account links. */
import { defineFeature } from '../app/feature';
import { registerSlackCommands } from './cli';
import { slackSearchAttributes } from './contract';
import { startDeferredEvents } from './deferred-events';
import { SlackQuota } from './quota';
import { sweepSlackReplays } from './replays';
import { createSlackRoutes } from './routes';
import { createSlackVerifier } from './verify';
import { createThreadRouter } from './thread-routing';
import { sweepIdleThreads } from './threads';
import { slackSettings } from './settings';

export { resealSlackSecrets } from './connections';

/** How often a worker process deletes replay-cache entries whose signature window has closed. */
const REPLAY_SWEEP_INTERVAL_MS = 60_000;
/** How often a worker process starts the events kept while Temporal did not take them (src/slack/deferred-events.ts). */
const DEFERRED_SWEEP_INTERVAL_MS = 5_000;
/** A thread with no new request for this long is forgotten: a reply in it is no longer a follow-up. */
const THREAD_RETENTION_MS = 30 * 24 * 3_600_000;
const THREAD_SWEEP_INTERVAL_MS = 3_600_000;

export const slackFeature = defineFeature({
  name: 'slack',
  settings: slackSettings,
  searchAttributes: Object.values(slackSearchAttributes),
  // The quota is shared by every replica through Postgres; the feature builds it from the deps.
  routes: (deps) =>
    createSlackRoutes({
      ...deps,
      quota: new SlackQuota(deps.db, deps.log),
      verifier: createSlackVerifier(deps),
      threads: createThreadRouter(deps),
    }),
  sweeps: [
    {
      name: 'slack deferred events',
      intervalMs: DEFERRED_SWEEP_INTERVAL_MS,
      run: async (deps) => {
        const done = await startDeferredEvents(deps);
        if (done.started + done.failed > 0) deps.log.info(done, 'started slack events kept while Temporal did not take them');
      },
    },
    {
      name: 'slack replay cache',
      intervalMs: REPLAY_SWEEP_INTERVAL_MS,
      run: async (deps, now) => {
        const deleted = await sweepSlackReplays(deps.db, now);
        if (deleted > 0) deps.log.debug({ deleted }, 'swept expired slack replay-cache entries');
      },
    },
    {
      name: 'slack idle threads',
      intervalMs: THREAD_SWEEP_INTERVAL_MS,
      run: async (deps, now) => {
        const deleted = await sweepIdleThreads(deps.db, new Date(now.getTime() - THREAD_RETENTION_MS));
        if (deleted > 0) deps.log.debug({ deleted }, 'forgot slack threads idle for 30 days');
      },
    },
  ],
  cli: registerSlackCommands,
});
