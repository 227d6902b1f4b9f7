/**
 * Temporal Schedules a feature asks for, created at worker start or brought up to date when they
 * already exist, so every worker of a deployment may register them and the last one wins.
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import type { WorkflowRef } from './contract';

/** A workflow a feature runs every `everyMs` on the process's task queue. */
export interface FeatureSchedule<A extends unknown[] = unknown[]> {
  scheduleId: string;
  workflow: WorkflowRef<A, unknown>;
  /** The prefix of each started workflow's id (Temporal appends the start time). */
  workflowId: string;
  everyMs: number;
  args: A;
}

export async function ensureSchedules(client: Client, taskQueue: string, schedules: readonly FeatureSchedule[]): Promise<void> {
  for (const schedule of schedules) {
    const spec = { intervals: [{ every: schedule.everyMs }] };
    const action = {
      type: 'startWorkflow' as const,
      workflowType: schedule.workflow.workflowType,
      workflowId: schedule.workflowId,
      taskQueue,
      args: schedule.args,
    };
    try {
      // A run still going when the next is due is not doubled.
      await client.schedule.create({ scheduleId: schedule.scheduleId, spec, action, policies: { overlap: ScheduleOverlapPolicy.SKIP } });
    } catch (error) {
      if (!(error instanceof ScheduleAlreadyRunning)) throw error;
      await client.schedule.getHandle(schedule.scheduleId).update((previous) => ({ ...previous, spec, action }));
    }
  }
}
