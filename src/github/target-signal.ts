/**
 * Hands a recorded sync event to its target's workflow, starting the workflow if it had closed:
 * the one way a sync reaches a target, for the delivery's activity, the sync route and `den`.
 */
import type { AdmissionMode } from '../app/admission';
import type { IngressGateway } from '../app/ingress';
import { githubSearchAttributes, githubSyncSignal, githubTargetWorkflow, githubTargetWorkflowId, type GithubSyncSignal } from './contract';
import type { GithubTarget } from './target-records';

export async function signalTarget(
  ingress: IngressGateway,
  sync: {
    target: Pick<GithubTarget, 'targetId' | 'repository' | 'organizationId'>;
    signal: GithubSyncSignal;
    /** GITHUB_TARGET_IDLE, for a workflow this starts. */
    idleMs: number;
    admission: AdmissionMode;
  },
): Promise<void> {
  const { target, signal } = sync;
  await ingress.signalWithStart({
    workflow: githubTargetWorkflow,
    id: githubTargetWorkflowId(target.targetId),
    args: [{ targetId: target.targetId, repository: target.repository, idleMs: sync.idleMs }],
    signal: githubSyncSignal,
    signalArgs: [signal],
    // The target's actor closes when idle and starts again on its next sync.
    reopen: true,
    tenancy: { tenant: target.organizationId, admission: sync.admission },
    searchAttributes: [
      { key: githubSearchAttributes.GithubTargetId, value: target.targetId },
      { key: githubSearchAttributes.GithubRepository, value: target.repository },
    ],
  });
}
