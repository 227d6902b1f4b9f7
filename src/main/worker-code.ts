/**
 * What the worker runs of each feature: its workflow module (workflows/<feature>.ts, bundled) and
 * its activities (activities/<feature>.ts), built from that feature's worker deps. Only the
 * composition root imports workflows/ and activities/ (ESLint): a feature starts its workflows by
 * the refs of its contract.ts, and never imports either.
 */
import path from 'node:path';
import type { ActivityFunction, Feature, WorkerDeps } from '../app/feature';
import { createGithubActivities } from '../../activities/github';
import { createMcpActivities } from '../../activities/mcp';
import { createPlatformActivities } from '../../activities/platform';
import { createRunActivities } from '../../activities/runs';
import { createSlackActivities } from '../../activities/slack';
import { githubFeature } from '../github';
import { mcpFeature, type McpNetworkOverrides } from '../mcp';
import { runsFeature } from '../runs';
import { slackFeature } from '../slack';
import { platformFeature } from './platform';

export interface WorkerCodeOptions {
  /** MCP probes' network: tests inject a resolver that needs no DNS. */
  mcpNetwork?: McpNetworkOverrides;
  /** The clock GitHub's sync and reconcile read (rate-limit waits, token expiry, the delivery window): tests inject one. */
  now?: () => number;
}

/** One feature's worker code, its activities typed by that feature's own settings. */
interface FeatureCode<S> {
  feature: Feature<S>;
  /** The workflow module, without extension (tsx runs the .ts, production the compiled .js). */
  workflows: string;
  activities(deps: WorkerDeps<S>): Record<string, ActivityFunction>;
}

const workflowModule = (name: string) => path.join(__dirname, '..', '..', 'workflows', name);

function code<S>(parts: FeatureCode<S>): FeatureCode<unknown> {
  return parts as unknown as FeatureCode<unknown>;
}

export function workerCode(options: WorkerCodeOptions = {}): FeatureCode<unknown>[] {
  return [
    code({ feature: platformFeature, workflows: workflowModule('ping'), activities: () => createPlatformActivities() }),
    code({ feature: runsFeature, workflows: workflowModule('runs'), activities: createRunActivities }),
    code({ feature: slackFeature, workflows: workflowModule('slack'), activities: createSlackActivities }),
    code({
      feature: githubFeature,
      workflows: workflowModule('github'),
      activities: (deps) => createGithubActivities({ ...deps, now: options.now }),
    }),
    code({
      feature: mcpFeature,
      workflows: workflowModule('mcp'),
      activities: (deps) => createMcpActivities({ ...deps, mcpNetwork: options.mcpNetwork }),
    }),
  ];
}

/** Every workflow module, bundled for the worker. */
export const WORKFLOW_MODULES = workerCode().map((part) => part.workflows);
