/** Helpers for the automation-run tests: a small HTTP client, bounded polling, history checks. */
import { randomUUID } from 'node:crypto';
import { runWorkflowId, type RunEventType, type RunSummary } from '../../src/runs/contract';
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
    /** Waits until GET answers with one of `statuses`; returns the summary. */
    async waitForStatus(id: string, statuses: string[], timeoutMs = 10_000): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
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
 * The run workflow's result: its final summary, returned only after the last events and the
 * closed row are persisted (a live query may already say `succeeded` a moment before).
 */
export async function runResult(stack: TestStack, organizationId: string, runId: string, timeoutMs = 15_000): Promise<RunSummary> {
  const handle = stack.services.temporal.client.workflow.getHandle(runWorkflowId(organizationId, runId));
  return Promise.race([
    handle.result() as Promise<RunSummary>,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`run ${runId} did not end within ${timeoutMs} ms`)), timeoutMs).unref()),
  ]);
}
