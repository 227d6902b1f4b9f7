/**
 * A member's runs, from Slack: the Cancel button and `/den cancel` ask a run to stop, and
 * `/den status` lists the runs still going. Who may cancel: the run's member, or an admin of its
 * organization, each known by their linked Slack user. The run itself applies the same rule (its
 * Update's validator); this side refuses first, so a stranger's click never reaches Temporal.
 */
import { isAdmin } from '../app/http/auth';
import type { IngressGateway } from '../app/ingress';
import type { Notices } from '../app/notices';
import type { Db } from '../app/store/db';
import { liveMember } from '../identity';
import { acceptCancel } from '../runs';
import { runSummaryQuery, runWorkflowId, type RunSummary } from '../runs/contract';
import { findAccountLink } from './links';

/** Slack wants its answer within 3 s: each call to a run may take this long at most. */
const SLACK_CALL_TIMEOUT_MS = 2_000;
/**
 * How long a cancel waits for the run to accept it: with the Postgres reads before it, well
 * within Slack's 3 s. The run's handler then records it on its own time.
 */
const CANCEL_ACCEPT_TIMEOUT_MS = 1_500;

export interface RunControlDeps {
  db: Db;
  ingress: IngressGateway;
  notices: Notices;
  now: () => number;
}

/** A run a Slack invocation started, as the member's limits recorded it. */
interface SlackRun {
  runId: string;
  organizationId: string;
  memberId: string;
  startedAt: Date;
}

/**
 * How a cancel from Slack ended, said to the clicker. `unconfirmed`: the run did not answer within
 * the bound, so whether it took the cancel is not known yet (never said to have failed).
 */
export type CancelOutcome = 'requested' | 'unconfirmed' | 'not_linked' | 'not_allowed' | 'closed' | 'no_active_run' | 'failed';

const runsOf = (db: Db, connectionId: string) =>
  db
    .selectFrom('slack_member_invocations')
    .select(['run_id as runId', 'organization_id as organizationId', 'member_id as memberId', 'started_at as startedAt'])
    .where('connection_id', '=', connectionId);

/** The member's runs from this connection that have not ended, newest first. */
async function activeSlackRuns(db: Db, connectionId: string, memberId: string): Promise<SlackRun[]> {
  return runsOf(db, connectionId).where('member_id', '=', memberId).where('ended_at', 'is', null).orderBy('started_at', 'desc').execute();
}

/** The caller a Slack user is, for the run's own check: their linked member and whether they administer. */
async function callerOf(db: Db, connectionId: string, slackUserId: string) {
  const link = await findAccountLink(db, connectionId, slackUserId);
  if (!link) return undefined;
  const member = await liveMember(db, link.memberId).catch(() => undefined);
  if (!member) return undefined;
  return { organizationId: link.organizationId, memberId: link.memberId, admin: isAdmin(member.role) };
}

/** Asks the run to stop on behalf of this Slack user, if they may. */
export async function cancelFromSlack(
  deps: RunControlDeps,
  input: { connectionId: string; slackUserId: string; runId: string | null; requestId: string; timeoutMs?: number },
): Promise<CancelOutcome> {
  const caller = await callerOf(deps.db, input.connectionId, input.slackUserId);
  if (!caller) return 'not_linked';
  const run =
    input.runId === null
      ? (await activeSlackRuns(deps.db, input.connectionId, caller.memberId))[0]
      : await runsOf(deps.db, input.connectionId).where('run_id', '=', input.runId).executeTakeFirst();
  if (!run) return input.runId === null ? 'no_active_run' : 'not_allowed';
  const mayCancel = run.memberId === caller.memberId || (caller.admin && run.organizationId === caller.organizationId);
  if (!mayCancel) return 'not_allowed';
  try {
    const answer = await acceptCancel(deps, {
      organizationId: run.organizationId,
      runId: run.runId,
      caller: { memberId: caller.memberId, admin: caller.admin },
      reason: 'cancelled from Slack',
      timeoutMs: input.timeoutMs ?? CANCEL_ACCEPT_TIMEOUT_MS,
      // The same click sent again (a retry) is the same Update: the run takes it once.
      updateId: `slack-cancel/${input.requestId}`,
    });
    return CANCEL_OUTCOMES[answer.outcome];
  } catch {
    // Temporal did not answer in time: the Update may still be accepted.
    return 'unconfirmed';
  }
}

/** What the clicker is told for each answer of the run. */
const CANCEL_OUTCOMES = { accepted: 'requested', closed: 'closed', not_reachable: 'not_allowed', not_found: 'failed' } as const;

/** One active run as `/den status` shows it. */
export interface RunStatusLine {
  runId: string;
  status: string;
  startedAt: number;
  channel: string | null;
}

/** The caller's active runs with their live status (the run's own summary); unknown when it does not answer in time. */
export async function slackRunStatus(
  deps: RunControlDeps,
  input: { connectionId: string; slackUserId: string },
): Promise<RunStatusLine[] | 'not_linked'> {
  const caller = await callerOf(deps.db, input.connectionId, input.slackUserId);
  if (!caller) return 'not_linked';
  const runs = await activeSlackRuns(deps.db, input.connectionId, caller.memberId);
  return Promise.all(
    runs.map(async (run): Promise<RunStatusLine> => {
      const summary: RunSummary | undefined = await deps.ingress
        .query({ id: runWorkflowId(run.organizationId, run.runId), query: runSummaryQuery, args: [], timeoutMs: SLACK_CALL_TIMEOUT_MS })
        .catch(() => undefined);
      return {
        runId: run.runId,
        status: summary?.status ?? 'unknown',
        startedAt: run.startedAt.getTime(),
        channel: summary?.origin?.channel ?? null,
      };
    }),
  );
}
