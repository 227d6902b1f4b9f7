/** What more than one automation-run route uses: the tag, the report responses, errors and body shapes. */
import { errors } from '../../app/errors';
import { InvalidRequestError, OkResponse, Unavailable, authResponses } from '../../app/http/schemas';
import type { RunClaim, RunSummary } from '../contract';
import { RunClaimBody, RunConflictBody } from '../schemas';

export const RUN_TAGS = ['Automation Runs'];

export const reportResponses = {
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

export const claimResponses = {
  200: { description: 'Claimed: report with the returned attempt, and heartbeat before the lease expires.', schema: RunClaimBody },
  400: { description: 'Invalid id or body.', schema: InvalidRequestError },
  401: authResponses[401],
  503: { description: 'Temporal, its worker or Postgres could not decide the claim in time; retry.', schema: Unavailable },
};

export const runClosed = (status: string) => errors.conflict('run_closed', { status });
export const notFound = () => errors.notFound('No such automation run.');

/** A run's summary as the API shows it (`RunSummaryBody`). */
export function summaryBody(summary: RunSummary) {
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
    cancelRequested: summary.cancelRequested ?? null,
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

/** A successful claim as the API shows it (`RunClaimBody`). */
export const claimBody = (claim: RunClaim) => ({
  run: summaryBody(claim.run),
  attempt: claim.attempt,
  leaseExpiresAt: claim.leaseExpiresAt,
});
