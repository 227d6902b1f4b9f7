/** Hands a recorded sync event to its target's workflow with a Temporal client, starting the workflow if it had closed. */
import type { Client } from '@temporalio/client';
import { fairnessKey } from '../app/temporal/fairness';
import {
  GITHUB_SYNC_SIGNAL,
  githubSearchAttributes,
  githubTargetWorkflowId,
  type GithubSyncSignal,
  type GithubTargetInput,
} from './contract';
import type { GithubTarget } from './targets';

export async function signalTargetWorkflow(
  client: Client,
  options: { taskQueue: string; idleMs: number },
  target: GithubTarget,
  signal: GithubSyncSignal,
): Promise<void> {
  const input: GithubTargetInput = { targetId: target.targetId, repository: target.repository, idleMs: options.idleMs };
  await client.workflow.signalWithStart('githubTarget', {
    workflowId: githubTargetWorkflowId(target.targetId),
    taskQueue: options.taskQueue,
    args: [input],
    signal: GITHUB_SYNC_SIGNAL,
    signalArgs: [signal],
    typedSearchAttributes: [
      { key: githubSearchAttributes.GithubTargetId, value: target.targetId },
      { key: githubSearchAttributes.GithubRepository, value: target.repository },
    ],
    // A workflow started outside the front door inherits no priority: the target's organization is
    // its fairness key like every start of the front door's (ignored while the server's fairness
    // is off). Its weight stays the default; the front door's starts carry the set one.
    priority: { fairnessKey: fairnessKey(target.organizationId) },
  });
}
