/**
 * Automation-run routes, one module each. Thin: validate, deliver to the run's workflow
 * (src/runs/report.ts) or read its records (src/runs/store.ts), answer.
 */
import type { Route } from '../../app/http/route';
import { BacklogGate } from '../backlog';
import { RunCapacity } from '../capacity';
import { runCancelRequested } from '../cancel';
import type { RunDeps } from '../deps';
import { PresenceTracker } from '../presence';
import { createPostCompleteRoute } from './post-complete';
import { withPresence } from './presence';
import { createDeleteRunnerRoute, createListRunnersRoute, createRunnerTokenRoute } from './runners';
import { createGetEventsRoute } from './get-events';
import { createGetRunRoute } from './get-run';
import { createListRunsRoute } from './list-runs';
import { createPostCancelRoute } from './post-cancel';
import { createPostClaimRoute } from './post-claim';
import { createPostClaimNextRoute } from './post-claim-next';
import { createPostEventRoute } from './post-event';
import { createHeartbeatCoalescer, createPostHeartbeatRoute } from './post-heartbeat';

export function createRunRoutes(deps: RunDeps): Route[] {
  // One gate of each kind for every route, so they share their per-run verdicts and counts.
  const gates = { backlog: new BacklogGate(deps), capacity: new RunCapacity(deps) };
  // A cancel taken in this process, here or from Slack, reaches the run's coalesced heartbeats at once.
  const coalescer = createHeartbeatCoalescer(deps.settings);
  deps.notices.subscribe(runCancelRequested, ({ organizationId, runId }) => coalescer.noteCancelRequested(organizationId, runId));
  // A runtime is online while it claims or heartbeats (src/runs/presence.ts).
  const presence = new PresenceTracker(deps, deps.settings.runners.presenceWindowMs);
  const runRoutes = [
    createPostEventRoute(deps, gates),
    withPresence(createPostHeartbeatRoute(deps, gates, coalescer), presence),
    createPostCompleteRoute(deps, gates.backlog),
    createPostCancelRoute(deps),
    withPresence(createPostClaimNextRoute(deps, gates.capacity), presence),
    withPresence(createPostClaimRoute(deps, gates.capacity), presence),
    createGetRunRoute(deps),
    createGetEventsRoute(deps),
    createListRunsRoute(deps),
    createRunnerTokenRoute(deps),
  ];
  // A runner token opens these routes (and renews itself), with its member's reach; every other route refuses it.
  return [...runRoutes.map((route) => ({ ...route, runnerToken: true })), createListRunnersRoute(deps), createDeleteRunnerRoute(deps)];
}
