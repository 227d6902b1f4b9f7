/**
 * Automation-run routes (spec 4.3, 4.4, plus the read routes users expect). Thin: validate,
 * deliver to the run's workflow (./report.ts) or read its records (./store.ts), answer.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { errors } from '../app/errors';
import { isAdmin } from '../app/http/auth';
import { defineRoute, type Route } from '../app/http/route';
import { InvalidRequestError, OkResponse, Unavailable, authResponses } from '../app/http/schemas';
import { temporalCall } from '../app/temporal/client';
import { isClosedRunStatus, runSummaryQuery, runWorkflowId, type RunClaim, type RunSummary } from './contract';
import { claimNext, claimRun } from './claim';
import { canSee } from './visibility';
import { reconcileRun } from './reconcile';
import { BacklogGate } from './backlog';
import { HeartbeatCoalescer } from './heartbeat-coalescer';
import type { RunDeps } from './deps';
import { deliverReport, isSameCompletion, type RunReport } from './report';
import {
  EVENT_BODY_LIMIT_BYTES,
  HEARTBEAT_BODY_LIMIT_BYTES,
  RunClaimBody,
  RunClaimNextBody,
  RunClaimRequestBody,
  RunConflictBody,
  RunEventBody,
  RunEventsBody,
  RunEventsQuery,
  RunHeartbeatBody,
  RunIdParams,
  RunListBody,
  RunListQuery,
  RunSummaryBody,
} from './schemas';
import { findRun, hasRunEvents, listRunEvents, listRuns } from './store';

const TAGS = ['Automation Runs'];

const reportResponses = {
  200: { description: 'Durably accepted by the run (or coalesced into a heartbeat already in flight).', schema: OkResponse },
  400: { description: 'Invalid path parameter or body; one detail per problem, each with its path.', schema: InvalidRequestError },
  401: authResponses[401],
  404: { description: "Another member's run (members see only their own)." },
  409: {
    description:
      'Decided by the run before the ack; nothing was recorded. `run_closed`: the run has ended; it is never started again. ' +
      '`not_claimed`: a queued (Slack-routed) run takes reports only after a claim. `stale_attempt`: an older attempt, ' +
      'an attempt whose lease was lost, or (claimed runs) an attempt no claim started. Events only: `attempt_out_of_range`: ' +
      "above the run's `maxAttempts`; `sequence_out_of_window`: further ahead than the run buffers (`expected`, `max`); " +
      '`buffer_full`: the out-of-order payloads would exceed `maxBufferedBytes` (send `expected` first); ' +
      "`after_terminal`: beyond the run's `terminal` event (`terminalSequence`); `terminal_not_last`: a `terminal` " +
      'event below a sequence the run already holds (`lastSequence`).',
    schema: RunConflictBody,
  },
  413: { description: 'Body larger than the route limit (plain text).' },
  503: { description: 'Temporal or Postgres unreachable: nothing was recorded; retry.', schema: Unavailable },
};

const runClosed = (status: string) => errors.conflict('run_closed', { status });
const notFound = () => errors.notFound('No such automation run.');

export function createRunRoutes(deps: RunDeps): Route[] {
  const { db, temporal, config, metrics, now } = deps;
  // Heartbeats are coalesced per process: at most one forwarded per (run, attempt) per window,
  // a fraction of the run's own lease (learned from its row when a heartbeat is forwarded).
  const fraction = config.runAdmission.heartbeatCoalesceFraction;
  const coalescer = new HeartbeatCoalescer(HeartbeatCoalescer.windowFor(config.runs.leaseTimeoutMs, fraction), undefined, fraction);
  const backlog = new BacklogGate(deps);

  const postEvent = defineRoute({
    method: 'post',
    path: '/v1/automation-runs/{id}/events',
    summary: 'Report one event of an automation run',
    description:
      'Starts the run on its first report. Events of the current attempt are applied in `sequence` order ' +
      '(out-of-order ones wait for the gap; duplicates and older attempts are ignored). A `terminal` event ' +
      '(`payload.status` succeeded|failed|cancelled, default succeeded) ends the run once every earlier sequence ' +
      'is applied. After that, reports get 409, except a repeat of the same completion, which is idempotent.',
    tags: TAGS,
    auth: 'authenticated',
    ingress: true,
    params: RunIdParams,
    body: { kind: 'json', schema: RunEventBody, limitBytes: EVENT_BODY_LIMIT_BYTES },
    responses: reportResponses,
    handler: async ({ params, body, principal }) => {
      const event = { ...body, receivedAt: now() };
      const runReport: RunReport = { kind: 'event', event };
      const outcome = await deliverReport(deps, principal, params.id, runReport, backlog);
      if (outcome.result === 'closed') {
        if (!isSameCompletion(runReport, outcome.status)) throw runClosed(outcome.status);
        return { status: 200, body: { ok: true }, outcome: { outcome: 'duplicate', reason: 'same_completion' } };
      }
      return { status: 200, body: { ok: true }, outcome: { outcome: outcome.result, reason: event.type } };
    },
  });

  const postHeartbeat = defineRoute({
    method: 'post',
    path: '/v1/automation-runs/{id}/heartbeat',
    summary: 'Send a heartbeat for an automation run',
    description:
      "Extends the current attempt's lease; the first heartbeat of a newer attempt starts it. Each process " +
      "forwards at most one heartbeat per (run, attempt) per `RUN_HEARTBEAT_COALESCE_FRACTION` (default a quarter) of the run's own lease and answers the others at once.",
    tags: TAGS,
    auth: 'authenticated',
    ingress: true,
    params: RunIdParams,
    body: { kind: 'json', schema: RunHeartbeatBody, limitBytes: HEARTBEAT_BODY_LIMIT_BYTES },
    responses: reportResponses,
    handler: async ({ params, body, principal }) => {
      const key = HeartbeatCoalescer.key(principal.organizationId, params.id, body.attempt);
      const at = now();
      const admission = coalescer.admit(key, at);
      if (!admission.forward) {
        metrics.heartbeats.inc({ result: 'coalesced' });
        if (admission.closedStatus !== undefined) throw runClosed(admission.closedStatus);
        return { status: 200, body: { ok: true }, outcome: { outcome: 'acknowledged', reason: 'coalesced' } };
      }
      let outcome;
      try {
        outcome = await deliverReport(
          deps,
          principal,
          params.id,
          { kind: 'heartbeat', heartbeat: { attempt: body.attempt, receivedAt: at } },
          backlog,
        );
      } catch (error) {
        // Nothing was recorded: the next heartbeat must be forwarded, not coalesced.
        coalescer.release(key, at);
        throw error;
      }
      if (outcome.result === 'closed') {
        coalescer.markClosed(key, outcome.status, at);
        throw runClosed(outcome.status);
      }
      coalescer.forwarded(key, at, outcome.leaseTimeoutMs);
      metrics.heartbeats.inc({ result: 'forwarded' });
      return { status: 200, body: { ok: true }, outcome: { outcome: outcome.result, reason: 'heartbeat' } };
    },
  });

  function summaryBody(summary: RunSummary) {
    return {
      id: summary.id,
      status: summary.status,
      attempt: summary.attempt,
      createdAt: summary.createdAt,
      startedAt: summary.startedAt,
      endedAt: summary.endedAt,
      lastHeartbeatAt: summary.lastHeartbeatAt,
      leaseExpiresAt: summary.leaseExpiresAt,
      eventCount: summary.eventCount,
      countsByType: summary.countsByType,
      usage: summary.usage,
      error: summary.error,
      memberId: summary.memberId ?? null,
      ignoredEvents: summary.ignoredEvents ?? { duplicate: 0, stale: 0, rejected: 0, overflow: 0, afterClose: 0 },
      input: summary.input ?? null,
      origin: summary.origin
        ? {
            kind: summary.origin.kind,
            connectionId: summary.origin.connectionId,
            teamId: summary.origin.teamId,
            channelId: summary.origin.channel,
            threadTs: summary.origin.threadTs,
            userId: summary.origin.slackUserId,
          }
        : null,
    };
  }

  const getRun = defineRoute({
    method: 'get',
    path: '/v1/automation-runs/{id}',
    summary: "An automation run's summary",
    description:
      "Live runs answer from the run's workflow (a query); ended runs from the `automation_runs` table. " +
      "Another organization's run, or for a member another member's, is a 404.",
    tags: TAGS,
    auth: 'authenticated',
    params: RunIdParams,
    responses: {
      200: { description: 'The summary.', schema: RunSummaryBody },
      400: { description: 'Invalid id.', schema: InvalidRequestError },
      401: authResponses[401],
      404: { description: 'No such run in your organization.' },
      503: { description: 'Temporal unreachable and no stored summary.', schema: Unavailable },
    },
    handler: async ({ params, principal }) => {
      let row = await findRun(db, principal.organizationId, params.id);
      if (row && !canSee(principal, row.memberId)) throw notFound();
      // An open row whose workflow ended outside its own logic (terminated…) is closed first:
      // a query would replay the workflow and answer with its last state, `running`.
      if (row && !isClosedRunStatus(row.status) && (await reconcileRun(deps, principal.organizationId, params.id)) !== undefined) {
        row = await findRun(db, principal.organizationId, params.id);
      }
      if (row && isClosedRunStatus(row.status)) return { status: 200, body: summaryBody(row.summary) };
      try {
        const live = await temporalCall(
          temporal,
          'query',
          config.temporal.startTimeoutMs,
          () => temporal.client.workflow.getHandle(runWorkflowId(principal.organizationId, params.id)).query(runSummaryQuery),
          metrics,
        );
        if (!canSee(principal, live.memberId)) throw notFound();
        return { status: 200, body: summaryBody(live) };
      } catch (error) {
        // The stored summary is current as of the last transition or persisted batch.
        if (row) return { status: 200, body: summaryBody(row.summary) };
        if (error instanceof WorkflowNotFoundError) throw notFound();
        throw error;
      }
    },
  });

  const getEvents = defineRoute({
    method: 'get',
    path: '/v1/automation-runs/{id}/events',
    summary: "An automation run's persisted events, in order",
    description: 'Ordered by attempt, then sequence. Page with `attempt` and `after` (the last sequence seen).',
    tags: TAGS,
    auth: 'authenticated',
    params: RunIdParams,
    query: RunEventsQuery,
    responses: {
      200: { description: 'The events.', schema: RunEventsBody },
      400: { description: 'Invalid id or query.', schema: InvalidRequestError },
      401: authResponses[401],
      404: { description: 'No such run in your organization.' },
    },
    handler: async ({ params, query, principal }) => {
      const row = await findRun(db, principal.organizationId, params.id);
      if (row && !canSee(principal, row.memberId)) throw notFound();
      const events = await listRunEvents(db, { organizationId: principal.organizationId, runId: params.id, ...query });
      if (events.length === 0 && !(await runExists(principal.organizationId, params.id))) {
        throw errors.notFound('No such automation run.');
      }
      return { status: 200, body: { events } };
    },
  });

  /** A run the table does not show yet may still exist: its workflow writes the row a moment after it starts. */
  async function runExists(organizationId: string, runId: string): Promise<boolean> {
    if (await findRun(db, organizationId, runId)) return true;
    if (await hasRunEvents(db, organizationId, runId)) return true;
    try {
      await temporalCall(temporal, 'describe', config.temporal.startTimeoutMs, () =>
        temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId)).describe(),
      );
      return true;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return false;
      throw error;
    }
  }

  const listRunsRoute = defineRoute({
    method: 'get',
    path: '/v1/automation-runs',
    summary: "Automation runs, newest first: a member's own, or the organization's for owners and admins",
    description:
      'Read from the `automation_runs` table, which each run workflow keeps current at every status ' +
      'transition (not from Temporal visibility, which is eventually consistent). `?status=queued` lists ' +
      'runs waiting for a claim (POST /v1/automation-runs/claim).',
    tags: TAGS,
    auth: 'authenticated',
    query: RunListQuery,
    responses: {
      200: { description: 'The runs.', schema: RunListBody },
      400: { description: 'Invalid query.', schema: InvalidRequestError },
      401: authResponses[401],
    },
    handler: async ({ query, principal }) => {
      const runs = await listRuns(db, {
        organizationId: principal.organizationId,
        ...query,
        ...(isAdmin(principal.role) ? {} : { memberId: principal.memberId }),
      });
      return { status: 200, body: { runs: runs.map(summaryBody) } };
    },
  });

  const claimBody = (claim: RunClaim) => ({ run: summaryBody(claim.run), attempt: claim.attempt, leaseExpiresAt: claim.leaseExpiresAt });
  const claimResponses = {
    200: { description: 'Claimed: report with the returned attempt, and heartbeat before the lease expires.', schema: RunClaimBody },
    400: { description: 'Invalid id or body.', schema: InvalidRequestError },
    401: authResponses[401],
    503: { description: 'Temporal, its worker or Postgres could not decide the claim in time; retry.', schema: Unavailable },
  };

  const postClaim = defineRoute({
    method: 'post',
    path: '/v1/automation-runs/{id}/claim',
    summary: 'Claim a queued automation run: start its next attempt, exclusively',
    description:
      "Decided by the run's workflow (a Temporal Update with a validator): of concurrent claims exactly one wins. " +
      'The claim starts the returned attempt with a fresh lease, as a first heartbeat would.',
    tags: TAGS,
    auth: 'authenticated',
    params: RunIdParams,
    body: { kind: 'json', schema: RunClaimRequestBody, limitBytes: HEARTBEAT_BODY_LIMIT_BYTES },
    responses: {
      ...claimResponses,
      404: { description: "No such run, or another member's." },
      409: { description: '`already_claimed` (another claim holds its lease) or `run_closed` (it has ended).', schema: RunConflictBody },
    },
    handler: async ({ params, principal }) => {
      const row = await findRun(db, principal.organizationId, params.id);
      if (!row || !canSee(principal, row.memberId)) throw notFound();
      if (isClosedRunStatus(row.status)) throw runClosed(row.status);
      const outcome = await claimRun(deps, principal.organizationId, params.id);
      if (!outcome.ok) throw errors.conflict(outcome.error, { status: outcome.status });
      return { status: 200, body: claimBody(outcome.claim) };
    },
  });

  const postClaimNext = defineRoute({
    method: 'post',
    path: '/v1/automation-runs/claim',
    summary: 'Claim the oldest queued automation run visible to the caller, waiting for one if asked',
    description:
      'Long-poll with `waitSeconds` (0 to 30): answers as soon as a run is claimable, or 204 when the wait ends ' +
      'with nothing. Two runtimes polling at once never get the same run.',
    tags: TAGS,
    auth: 'authenticated',
    body: { kind: 'json', schema: RunClaimNextBody, limitBytes: HEARTBEAT_BODY_LIMIT_BYTES },
    responses: { ...claimResponses, 204: { description: 'Nothing to claim within the wait.' } },
    handler: async ({ body, principal }) => {
      const claim = await claimNext(deps, principal, (body?.waitSeconds ?? 0) * 1000);
      return claim ? { status: 200, body: claimBody(claim) } : { status: 204 };
    },
  });

  return [postEvent, postHeartbeat, postClaimNext, postClaim, getRun, getEvents, listRunsRoute];
}
