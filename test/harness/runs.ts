/** Helpers for the automation-run tests: a small HTTP client, bounded polling, history checks. */
import { randomUUID } from 'node:crypto';
import { WorkflowIdReusePolicy } from '@temporalio/client';
import { runSummaryOfFailure, runWorkflowId, type RunEventType, type RunSummary, type RunWorkflowInput } from '../../src/runs/contract';
import { automationRun } from '../../workflows/runs';
import type { TestResponse, TestStack } from './stack';
import { waitFor } from './wait';

export interface EventInput {
  attempt: number;
  sequence: number;
  type: RunEventType;
  payload: Record<string, unknown>;
  createdAt: number;
}

export const event = (
  attempt: number,
  sequence: number,
  type: RunEventType = 'user',
  payload: Record<string, unknown> = { n: sequence },
): EventInput => ({ attempt, sequence, type, payload, createdAt: 1_700_000_000_000 + sequence });

export const newRunId = () => `run-${randomUUID()}`;

export function runsClient(stack: TestStack, headers: Record<string, string>) {
  const path = (id: string) => `/v1/automation-runs/${encodeURIComponent(id)}`;
  return {
    postEvent: (id: string, body: unknown): Promise<TestResponse> => stack.request('POST', `${path(id)}/events`, { headers, body }),
    heartbeat: (id: string, attempt: number): Promise<TestResponse> =>
      stack.request('POST', `${path(id)}/heartbeat`, { headers, body: { attempt } }),
    get: (id: string): Promise<TestResponse> => stack.request('GET', path(id), { headers }),
    events: (id: string, query = ''): Promise<TestResponse> => stack.request('GET', `${path(id)}/events${query}`, { headers }),
    list: (query = ''): Promise<TestResponse> => stack.request('GET', `/v1/automation-runs${query}`, { headers }),
    claim: (id: string): Promise<TestResponse> => stack.request('POST', `${path(id)}/claim`, { headers, body: {} }),
    claimNext: (waitSeconds?: number): Promise<TestResponse> =>
      stack.request('POST', '/v1/automation-runs/claim', { headers, body: waitSeconds === undefined ? {} : { waitSeconds } }),
    /** Waits until GET answers with one of `statuses`; returns the summary. */
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async waitForStatus(id: string, statuses: string[], timeoutMs = 10_000): Promise<any> {
      return waitFor(
        async () => {
          const res = await stack.request('GET', path(id), { headers });
          return res.status === 200 && statuses.includes(res.json.status) ? res.json : undefined;
        },
        timeoutMs,
        { what: `run ${id} to be ${statuses.join('|')}` },
      );
    },
  };
}

/** Signals of one name in a run workflow's history (all executions, following continue-as-new). */
export async function countSignals(stack: TestStack, organizationId: string, runId: string, signalName: string): Promise<number> {
  const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId));
  const history = await handle.fetchHistory();
  return (history.events ?? []).filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === signalName).length;
}

/**
 * The run workflow's final summary, returned only after the last events and the closed row are
 * persisted (a live query may already say `succeeded` a moment before): its result, or, for a
 * failed, timed-out or skipped run, the summary its Failed workflow carries.
 */
export async function runResult(stack: TestStack, organizationId: string, runId: string, timeoutMs = 15_000): Promise<RunSummary> {
  const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId));
  return Promise.race([
    (handle.result() as Promise<RunSummary>).catch((error: unknown) => {
      const summary = runSummaryOfFailure(error);
      if (summary === undefined) throw error;
      return summary;
    }),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`run ${runId} did not end within ${timeoutMs} ms`)), timeoutMs).unref(),
    ),
  ]);
}

/**
 * A queued, claim-required run as the Slack feature starts it (initialStatus `queued`), on the
 * stack's worker; resolves once the run's row lists it as queued.
 */
export async function startQueuedRun(
  stack: TestStack,
  options: { organizationId: string; memberId: string; text?: string; settings?: Partial<RunWorkflowInput['settings']> },
): Promise<{ runId: string; handle: Awaited<ReturnType<TestStack['services']['temporal']['client']['workflow']['start']>> }> {
  const runId = newRunId();
  const input: RunWorkflowInput = {
    organizationId: options.organizationId,
    runId,
    initialStatus: 'queued',
    createdAt: Date.now(),
    settings: { ...stack.config.runs.defaults, ...options.settings },
    memberId: options.memberId,
    input: { text: options.text ?? 'do the thing' },
  };
  const handle = await stack.services.temporal.client.workflow.start(automationRun, {
    workflowId: runWorkflowId(options.organizationId, runId),
    taskQueue: stack.services.temporal.taskQueue,
    args: [input],
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
  });
  await waitFor(
    async () =>
      (
        await stack.services.database.db
          .selectFrom('automation_runs')
          .select('status')
          .where('organization_id', '=', options.organizationId)
          .where('run_id', '=', runId)
          .executeTakeFirst()
      )?.status === 'queued',
    10_000,
    { what: `run ${runId} to be listed as queued` },
  );
  return { runId, handle };
}
