/**
 * What the steps of one Slack invocation share (workflows/slack.ts finds the member and reserves,
 * workflows/slack-answer.ts follows the run and answers, workflows/slack-legacy.ts replays older
 * events): the activity proxies, the invocation's context, and the run it starts as a child.
 */
import { ActivityFailure, ChildWorkflowFailure, proxyActivities, startChild } from '@temporalio/workflow';
import type { FirstMessageNotice, SlackActivities } from '../activities/slack';
import { byName, localFirst, LOCAL_POSTGRES_EFFECT, type ActivityCall } from './local-first';
import { automationRun } from './runs';
import { STREAM_CALL_LIMIT } from '../src/slack/stream';
import {
  runSummaryOfFailure,
  runWorkflowId,
  type RunContextMessage,
  type RunProgress,
  type RunSummary,
  type RunWorkflowInput,
} from '../src/runs/contract';
import type { SlackAccountLinked, SlackEventInput, SlackEventState, SlackEventStatus } from '../src/slack/contract';

/** Postgres work: retried until it succeeds (Postgres outages must not lose an invocation). */
const RECORDS = { startToCloseTimeout: '30s', retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' } } as const;
/**
 * The same work locally first: a marker instead of an activity's three events, a workflow task
 * and a task-queue round trip; after 10 s of failures, the regular activity, still retried
 * without bound. Which of the two an event uses is decided once, in workflows/slack-legacy.ts.
 */
export const localRecords = localFirst<SlackActivities>(LOCAL_POSTGRES_EFFECT, RECORDS);
export const regularRecords = byName<SlackActivities>(RECORDS);

/** Slack Web API: a 429's Retry-After overrides the interval (activities/slack.ts). Bounded. */
export const slackApi = proxyActivities<SlackActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m', maximumAttempts: 6 },
});

/** A progress edit is worth little once stale: a few quick tries, then the next state goes out. */
export const progressApi = proxyActivities<SlackActivities>({
  startToCloseTimeout: '15s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '5s', maximumAttempts: 3 },
});

/** What a cancel must undo, in a scope the cancel cannot reach. */
export interface Cleanup {
  pendingLink: boolean;
  reserved: boolean;
}

type SetStatus = (status: SlackEventStatus, detail?: string | null) => void;

/** What the signals brought: the link an invocation waits for, its connection's removal, the run's newest progress and its end. */
export interface Signals {
  link: () => SlackAccountLinked | undefined;
  removed: () => string | undefined;
  progress: () => RunProgress | null;
  ended: () => RunSummary | undefined;
  /** A runtime claimed the invocation's run (runClaimedSignal). */
  claimed: () => boolean;
  /** How many times a request of the thread ended (slackThreadTurnSignal): a queued follow-up waits for it to grow. */
  turns: () => number;
}

/** One invocation's context: its event, its records, its state and what its signals brought. */
export interface Invocation {
  input: SlackEventInput;
  invocation: NonNullable<SlackEventInput['invocation']>;
  records: ActivityCall<SlackActivities>;
  state: SlackEventState;
  setStatus: SetStatus;
  signals: Signals;
  cleanup: Cleanup;
  /** Where the ephemeral messages go. */
  thread: { connectionId: string; channel: string; user: string; threadTs: string | null };
}

export type Member = { organizationId: string; memberId: string };

/** The run an invocation reserved: whose it is, its id, the thread it answers in, and how it opens there. */
export interface ReservedRun {
  member: Member;
  runId: string;
  threadTs: string;
  opening?: RunOpening;
}

/** What the conversation and the runtime gate decided before the run starts (workflows/slack-conversation.ts). */
export interface RunOpening {
  /** The thread's earlier messages: the run's context. */
  context?: RunContextMessage[];
  /** The first message, already in the thread (a queued follow-up said so there). */
  posted?: string | null;
  /** What the first message says instead of "Working on it…". */
  notice?: FirstMessageNotice;
  /** An assistant thread: its status line while the run works, and its title from the first ask (null: it has one). */
  assistant?: { title: string | null };
}

/** Where the invocation's message lives. */
export interface MessageRef {
  connectionId: string;
  channel: string;
  threadTs: string;
}

/** What the answer needs of a run's summary. */
export type RunOutcome = Pick<RunSummary, 'status' | 'error' | 'lastAssistantText'>;

/**
 * How old an unfinished reservation must be before it no longer counts (its workflow was ended from
 * outside and never released it): longer than any run can live.
 */
export const staleReservationMs = (run: RunWorkflowInput['settings']): number =>
  run.claimDeadlineMs + run.maxDurationMs + run.retryWindowMs * run.maxAttempts + 3_600_000;

/** Before SLACK_PROGRESS_INTERVAL was part of the input (it always is in new events). */
const DEFAULT_PROGRESS_INTERVAL_MS = 3000;

export const progressInterval = (job: Invocation) => job.input.settings.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS;

/** The invocation's run as a child workflow: queued for the member's runtime, answering in the thread. */
export function childRunOptions(job: Invocation, run: ReservedRun) {
  const { input, invocation } = job;
  const { member, runId, threadTs } = run;
  const runInput: RunWorkflowInput = {
    organizationId: member.organizationId,
    runId,
    initialStatus: 'queued',
    createdAt: Date.now(),
    settings: input.settings.run,
    memberId: member.memberId,
    origin: {
      kind: 'slack',
      connectionId: input.connectionId,
      teamId: input.teamId,
      channel: invocation.channel,
      threadTs,
      slackUserId: invocation.user,
    },
    input: { text: invocation.text, ...(run.opening?.context?.length ? { context: run.opening.context } : {}) },
    // The run tells this workflow at most one progress per interval, no more text than a stream call takes.
    progress: { intervalMs: progressInterval(job), maxChars: STREAM_CALL_LIMIT },
  };
  return {
    workflowId: runWorkflowId(member.organizationId, runId),
    args: [runInput] as [RunWorkflowInput],
    // The run is the member's record; it outlives this invocation if an operator ends it.
    parentClosePolicy: 'ABANDON' as const,
    workflowIdReusePolicy: 'REJECT_DUPLICATE' as const,
  };
}

/** The invocation's run as a child workflow, started (not awaited): the message is posted while it waits. */
export async function startInvocationRun(job: Invocation, run: ReservedRun) {
  job.setStatus('run_created');
  return startChild(automationRun, childRunOptions(job, run));
}

/**
 * A run's outcome, failed or not: a run that failed, timed out or was skipped ends its workflow
 * Failed with its summary, and the invocation still did its job and answers with that outcome.
 */
export function outcomeOfFailure(error: unknown): RunOutcome {
  // A cancel of this workflow goes to its caller, which releases the slot out of the cancel's reach.
  if (!(error instanceof ChildWorkflowFailure)) throw error;
  return runSummaryOfFailure(error) ?? { status: 'failed', error: 'run_workflow_failed', lastAssistantText: null };
}

/** The started run's outcome, failed or not. */
export async function outcomeOf(run: { result(): Promise<RunSummary> }): Promise<RunOutcome> {
  try {
    return await run.result();
  } catch (error) {
    return outcomeOfFailure(error);
  }
}

/** "Working on it…" (or a notice) with the Cancel button: the message's ts, or null when nothing could be posted. */
export async function postAccepted(
  ref: MessageRef,
  post: { runId: string; replyKey: string; since?: number; notice?: FirstMessageNotice },
): Promise<string | null> {
  try {
    return (await slackApi.slackPostAccepted({ ...ref, ...post })).ts ?? null;
  } catch (error) {
    if (error instanceof ActivityFailure) return null;
    throw error;
  }
}

/** A Slack post that failed after its retries must not fail the invocation's record. */
export async function bestEffort(post: () => Promise<{ posted: boolean }>): Promise<'posted' | 'skipped' | 'failed'> {
  try {
    return (await post()).posted ? 'posted' : 'skipped';
  } catch (error) {
    if (error instanceof ActivityFailure) return 'failed';
    throw error;
  }
}

/** How a final answer ended, and why when it failed. */
export type FinalResult = { result: 'posted' | 'skipped' | 'failed'; why?: string };
