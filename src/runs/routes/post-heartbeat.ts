/** POST /v1/automation-runs/{id}/heartbeat: extends an attempt's lease, coalesced per process. */
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import type { RunsSettings } from '../settings';
import type { RunAsk } from '../access';
import type { RunDeps } from '../deps';
import { HeartbeatCoalescer, type HeartbeatAnswer } from '../heartbeat-coalescer';
import { AppError } from '../../app/errors';
import { deliverReport, type ReportGates } from '../report';
import { HEARTBEAT_BODY_LIMIT_BYTES, RunHeartbeatBody, RunHeartbeatReply, RunIdParams } from '../schemas';
import { RUN_TAGS, reportResponses, runClosed } from './shared';

/**
 * Heartbeats are coalesced per process: one is forwarded per (run, attempt, member) when the lease
 * the last forward set would not outlast the caller's next heartbeat by a margin, and at least once
 * per RUN_HEARTBEAT_COALESCE_FRACTION of the run's own lease (learned from its row when a heartbeat
 * is forwarded). The run routes subscribe it to the process's cancels (src/runs/cancel.ts), to tell
 * the run's coalesced heartbeats at once.
 */
export function createHeartbeatCoalescer(settings: RunsSettings): HeartbeatCoalescer {
  const fraction = settings.admission.heartbeatCoalesceFraction;
  return new HeartbeatCoalescer(HeartbeatCoalescer.windowFor(settings.defaults.leaseTimeoutMs, fraction), undefined, fraction);
}

interface HeartbeatGates {
  report: ReportGates;
  coalescer: HeartbeatCoalescer;
  /** The forward in flight per coalescer key: heartbeats that arrive meanwhile share its answer. */
  inFlight: Map<string, Promise<Reply>>;
}

/** A heartbeat as posted: who sends it, for which run, and the attempt it keeps alive. */
interface HeartbeatPost extends RunAsk {
  attempt: number;
}

const heartbeatReply = (answer: HeartbeatAnswer) => ({ ok: true, ...answer });
const coalesced = { outcome: 'acknowledged', reason: 'coalesced' } as const;

/**
 * Answers a coalesced heartbeat at once, only for a member whose own heartbeat was forwarded (and
 * so checked) within the window, and shares an in-flight forward's answer, refusal included;
 * forwards the others to the run's workflow.
 */
async function postHeartbeat(deps: RunDeps, gates: HeartbeatGates, { principal, runId, attempt }: HeartbeatPost): Promise<Reply> {
  const { metrics, now } = deps;
  const { coalescer, inFlight } = gates;
  const key = HeartbeatCoalescer.key({ organizationId: principal.organizationId, runId, attempt, memberId: principal.memberId });
  const at = now();
  const admission = coalescer.admit(key, at);
  const pending = inFlight.get(key);
  if (!admission.forward && 'pending' in admission && pending !== undefined) {
    metrics.heartbeats.inc({ result: 'coalesced' });
    return { ...(await pending), outcome: coalesced };
  }
  if (!admission.forward && 'refusal' in admission) {
    metrics.heartbeats.inc({ result: 'refused' });
    throw admission.refusal;
  }
  if (!admission.forward && !('pending' in admission)) {
    metrics.heartbeats.inc({ result: 'coalesced' });
    if ('closedStatus' in admission) throw runClosed(admission.closedStatus);
    const { leaseExpiresAt, cancelRequested, attempt: current, leaseValid } = admission;
    return { status: 200, body: heartbeatReply({ leaseExpiresAt, cancelRequested, attempt: current, leaseValid }), outcome: coalesced };
  }
  const leaseFloor = admission.forward ? admission.leaseFloor : undefined;
  const forward = forwardHeartbeat(deps, gates, { principal, runId, key, at, attempt, leaseFloor });
  inFlight.set(key, forward);
  try {
    return await forward;
  } finally {
    if (inFlight.get(key) === forward) inFlight.delete(key);
  }
}

/** A heartbeat on its way to the run: its coalescing key, when it came, and the least lease end this process knows. */
interface HeartbeatForward extends HeartbeatPost {
  key: string;
  at: number;
  leaseFloor?: number;
}

/** Forwards one heartbeat to the run's workflow and tells the coalescer what came of it. */
async function forwardHeartbeat(deps: RunDeps, gates: HeartbeatGates, heartbeat: HeartbeatForward): Promise<Reply> {
  const { principal, runId, key, at, attempt, leaseFloor } = heartbeat;
  const { coalescer } = gates;
  let outcome;
  try {
    const report = { kind: 'heartbeat', heartbeat: { attempt, receivedAt: at } } as const;
    outcome = await deliverReport(deps, { principal, runId, report, knowledge: { leaseFloor } }, gates.report);
  } catch (error) {
    // A run refused its start (beyond capacity, or its organization past its share) is refused
    // from memory until its Retry-After, without a Postgres read: a sender that asks again sooner
    // costs nothing more.
    if (error instanceof AppError && (error.code === 'capacity' || error.code === 'shed')) {
      coalescer.markRefused(key, at, { error, until: at + Number(error.headers['retry-after'] ?? 1) * 1000 });
      throw error;
    }
    // Nothing was recorded: the next heartbeat must be forwarded, not coalesced.
    coalescer.release(key, at);
    throw error;
  }
  if (outcome.result === 'closed') {
    coalescer.markClosed(key, outcome.status, at);
    throw runClosed(outcome.status);
  }
  const cancelRequested = outcome.cancelRequested === true;
  const lease = outcome.lease ?? { attempt, leaseValid: true };
  coalescer.forwarded(key, at, { leaseTimeoutMs: outcome.leaseTimeoutMs, cancelRequested, lease });
  deps.metrics.heartbeats.inc({ result: 'forwarded' });
  // The run applies the heartbeat at or after `at`, so its lease ends no sooner than this.
  const body = heartbeatReply({ leaseExpiresAt: at + outcome.leaseTimeoutMs, cancelRequested, ...lease });
  return { status: 200, body, outcome: { outcome: outcome.result, reason: 'heartbeat' } };
}

export function createPostHeartbeatRoute(deps: RunDeps, report: ReportGates, coalescer: HeartbeatCoalescer): Route {
  const gates: HeartbeatGates = { report, coalescer, inFlight: new Map() };
  return defineRoute({
    method: 'post',
    path: '/v1/automation-runs/{id}/heartbeat',
    summary: 'Send a heartbeat for an automation run',
    description:
      "Extends the current attempt's lease; the first heartbeat of a newer attempt starts it. Each process " +
      "answers a heartbeat at once while the lease its last forward set outlasts the caller's next heartbeat (expected after the largest of its last few gaps) by a margin, " +
      "and forwards it to the run otherwise, and at least once per `RUN_HEARTBEAT_COALESCE_FRACTION` (default 0.7) of the run's own lease: " +
      'a runtime that heartbeats at least every third of its lease keeps it. ' +
      'A heartbeat that could not be confirmed to reach the run before the lease it extends runs out is answered 503, never 200. ' +
      'A first heartbeat that would start a run beyond the live-run capacity (`RUN_CAPACITY`) gets 429 `capacity` with `Retry-After`. ' +
      "The reply adds to `{ok:true}` the lease the heartbeat set, whether a cancel was requested, the run's current `attempt` and " +
      "whether the heartbeat's attempt holds the lease (`leaseValid`): a coalesced reply answers from " +
      'what this process last learnt, and says `cancelRequested:false` for at most one coalescing window after a request.',
    tags: RUN_TAGS,
    auth: 'authenticated',
    ingress: true,
    params: RunIdParams,
    body: { kind: 'json', schema: RunHeartbeatBody, limitBytes: HEARTBEAT_BODY_LIMIT_BYTES },
    responses: {
      ...reportResponses,
      200: { description: 'Durably accepted by the run (or coalesced into a heartbeat already forwarded).', schema: RunHeartbeatReply },
    },
    handler: ({ params, body, principal }) => postHeartbeat(deps, gates, { principal, runId: params.id, attempt: body.attempt }),
  });
}
