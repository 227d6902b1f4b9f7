/**
 * Prometheus metrics of the front door, all in one registry created per app instance (tests
 * run several instances in one process). Names and labels are documented in docs/operations.md. Run
 * status transitions happen in workflows, so the worker exports them (workflows/runs.ts).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry });

  const metrics = {
    registry,
    httpDuration: new Histogram({
      name: 'den_http_request_duration_seconds',
      help: 'HTTP request duration by route template, method and status.',
      labelNames: ['route', 'method', 'status'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    ...ingressMetrics(registry),
    authFailures: new Counter({
      name: 'den_auth_failures_total',
      help: 'Failed authentications by surface and outcome: rejected (looked up or checked, 401) or unknown_cached (401 without a lookup).',
      labelNames: ['surface', 'outcome'] as const,
      registers: [registry],
    }),
    unauthenticatedBytes: new Gauge({
      name: 'den_unauthenticated_body_bytes',
      help: 'Bytes of request bodies held before their sender is authenticated (signed webhooks), against UNAUTHENTICATED_BODY_BUDGET.',
      registers: [registry],
    }),
    unauthenticatedCuts: new Counter({
      name: 'den_unauthenticated_body_cuts_total',
      help: 'Unauthenticated request bodies cut off for arriving slower than UNAUTHENTICATED_BODY_MIN_RATE, by reason: slow (past their grace) or preempted (to make room for another).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    unauthenticatedRefusals: new Counter({
      name: 'den_unauthenticated_body_refusals_total',
      help: 'Unauthenticated request bodies refused unread with 503 because the budget was full, by route template.',
      labelNames: ['route'] as const,
      registers: [registry],
    }),
    heartbeats: new Counter({
      name: 'den_run_heartbeats_total',
      help: 'Run heartbeats received, by whether they were forwarded to Temporal, coalesced, or refused from memory (a refusal still in force).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    presenceWrites: new Counter({
      name: 'den_runner_presence_writes_total',
      help: "Writes of a runtime's presence to Postgres (at most one per half presence window per runtime and process, and one per run it starts).",
      registers: [registry],
    }),
    admission: new Counter({
      name: 'den_admission_total',
      help: "Admission decisions per organization class (its fairness weight's class, never its id), sender mode and result.",
      labelNames: ['class', 'mode', 'result'] as const,
      registers: [registry],
    }),
    admissionInFlight: new Gauge({
      name: 'den_admission_in_flight',
      help: 'Engine calls admitted and not yet answered in this process, by organization class.',
      labelNames: ['class'] as const,
      registers: [registry],
    }),
    ...capacityMetrics(registry),
    temporalErrors: new Counter({
      name: 'den_temporal_client_errors_total',
      help: 'Temporal client calls that failed, by operation and kind.',
      labelNames: ['operation', 'kind'] as const,
      registers: [registry],
    }),
  };
  return metrics;
}

/** What webhooks and reports came to: their outcomes, their signatures that failed, and Slack's notices that it drops events. */
function ingressMetrics(registry: Registry) {
  return {
    ingress: new Counter({
      name: 'den_ingress_outcomes_total',
      help: 'Webhook and report outcomes by route: enqueued, duplicate, ineligible or rejected, with a reason.',
      labelNames: ['route', 'outcome', 'reason'] as const,
      registers: [registry],
    }),
    signatureFailures: new Counter({
      name: 'den_signature_failures_total',
      help: 'Requests whose provider signature did not verify, by route and reason.',
      labelNames: ['route', 'reason'] as const,
      registers: [registry],
    }),
    slackEventsRateLimited: new Counter({
      name: 'den_slack_events_rate_limited_total',
      help: "Minutes Slack said it dropped a connection's events (app_rate_limited), each counted once.",
      registers: [registry],
    }),
  };
}

/** What admission by measured capacity shows: the engine's delay, the limit it sets, the live runs and their refusals. */
function capacityMetrics(registry: Registry) {
  return {
    engineDelay: new Gauge({
      name: 'den_engine_delay_seconds',
      help: 'The engine delay this API process last read (the worst backlog age or report lag the workers published for its task queues), in seconds; -1 when no worker published lately.',
      registers: [registry],
    }),
    admissionLimit: new Gauge({
      name: 'den_admission_delay_limit',
      help: 'New work per second this API process admits, every organization together, while the engine delay is past ADMISSION_DELAY_TARGET; 0 while no limit applies.',
      registers: [registry],
    }),
    runCapacity: new Counter({
      name: 'den_run_capacity_total',
      help: 'Requests that would make a run live (a claim, or a report that starts a run or an attempt), by result: admitted or refused (429, reason capacity).',
      labelNames: ['via', 'result'] as const,
      registers: [registry],
    }),
    liveRuns: new Gauge({
      name: 'den_runs_live',
      help: 'Live runs (holding a lease) as this API process last counted them, with the ones it admitted since.',
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
