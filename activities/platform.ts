import { Context } from '@temporalio/activity';

export function createPlatformActivities() {
  return {
    /** The platform round-trip check: proves a workflow reached an activity on a live worker. */
    async echo(text: string): Promise<{ text: string; workflowId: string }> {
      return { text, workflowId: Context.current().info.workflowExecution?.workflowId ?? 'unknown' };
    },
  };
}

/** The activities as the feature's workflow proxies them. */
export type PlatformActivities = ReturnType<typeof createPlatformActivities>;
