/** The runs feature's settings: defaults each new run carries, and the API's admission bounds. */
import { z } from 'zod';
import { defineSettings, duration, int } from '../app/settings';
import type { RunSettings } from './contract';
import { runnerSettings } from './runner-settings';

/** What a new run is started with; each run keeps its own copy for life (RunSettings). */
export const runDefaults = defineSettings(
  {
    RUN_LEASE_TIMEOUT: duration('60s'),
    RUN_MAX_ATTEMPTS: int(2, 1, 100),
    RUN_RETRY_WINDOW: duration('5m'),
    RUN_MAX_DURATION: duration('60m'),
    RUN_CLAIM_DEADLINE: duration('10m'),
    RUN_CONTINUE_AS_NEW_EVENTS: int(2000, 10),
    RUN_EVENT_BUFFER_MAX: int(1000, 1),
  },
  (e): RunSettings => ({
    leaseTimeoutMs: e.RUN_LEASE_TIMEOUT,
    maxAttempts: e.RUN_MAX_ATTEMPTS,
    retryWindowMs: e.RUN_RETRY_WINDOW,
    maxDurationMs: e.RUN_MAX_DURATION,
    claimDeadlineMs: e.RUN_CLAIM_DEADLINE,
    continueAsNewEvents: e.RUN_CONTINUE_AS_NEW_EVENTS,
    eventBufferMax: e.RUN_EVENT_BUFFER_MAX,
  }),
);

export const runsSettings = defineSettings(
  {
    ...runDefaults.shape,
    ...runnerSettings.shape,
    // Applied events a run may hold unpersisted (Postgres refusing its writes) before the API
    // answers 503 for it, so senders retry instead of piling acked work into its history.
    RUN_UNPERSISTED_MAX_EVENTS: int(1000, 1),
    // Each API process forwards one heartbeat per (run, attempt) per this fraction of the run's
    // lease: at 0.7 of a 60 s lease and a beat every 10 s, one in five (docs/performance.md).
    // Above 0.75 the next heartbeat after the window could come after the lease.
    RUN_HEARTBEAT_COALESCE_FRACTION: z.coerce.number().gt(0).max(0.75).default(0.7),
    // Runs that may hold a lease at once, every organization together (0: no limit); the
    // default is what the capacity model gives two cores at 0.8 utilisation, about 0.63 ms of CPU
    // a second per live run (docs/capacity.md, "Live-run capacity").
    RUN_CAPACITY: int(2500, 0, 10_000_000),
  },
  (e) => ({
    defaults: runDefaults.build(e),
    admission: { unpersistedMaxEvents: e.RUN_UNPERSISTED_MAX_EVENTS, heartbeatCoalesceFraction: e.RUN_HEARTBEAT_COALESCE_FRACTION },
    capacity: { liveRuns: e.RUN_CAPACITY },
    runners: runnerSettings.build(e),
  }),
);

export type RunsSettings = ReturnType<typeof runsSettings.build>;
