/**
 * The one list of features. Everything that runs reads it: the API's routes, the worker's task
 * queues, sweeps and schedules, the search attributes, the settings and `den`. What the worker
 * runs of each (workflows and activities) is beside it, in src/main/worker-code.ts.
 */
import type { Feature } from '../app/feature';
import { githubFeature } from '../github';
import { identityFeature } from '../identity';
import { mcpFeature } from '../mcp';
import { runsFeature } from '../runs';
import { slackFeature } from '../slack';
import { platformFeature } from './platform';

const LIST = [platformFeature, identityFeature, runsFeature, slackFeature, githubFeature, mcpFeature] as const satisfies readonly Feature[];

/** The list's literal type: each feature's settings type under its name makes the Config's (src/main/config.ts). */
export type FeatureList = typeof LIST;

/** The descriptors as the root uses them: each part receives only its own feature's settings. */
export const FEATURES: readonly Feature[] = LIST;

/** Every feature's custom search attributes, registered on the dev server and at start-up. */
export const SEARCH_ATTRIBUTES = FEATURES.flatMap((feature) => feature.searchAttributes ?? []);

/** Every task queue the workers poll: the main one, then each feature's own derived from it. */
export function taskQueuesOf(mainQueue: string): string[] {
  return [mainQueue, ...FEATURES.flatMap((feature) => feature.taskQueues?.(mainQueue) ?? [])];
}
