/**
 * The one list of features. Everything that runs reads it: the API's routes, the worker's
 * workflows, activities, task queues and sweeps, the search attributes, the settings and `den`.
 */
import type { Feature } from '../app/feature';
import { githubFeature } from '../github';
import { identityFeature } from '../identity';
import { createMcpFeature, type McpNetworkOverrides } from '../mcp';
import { runsFeature } from '../runs';
import { slackFeature } from '../slack';
import { platformFeature } from './platform';

export interface FeatureOptions {
  /** MCP probes' network: tests inject a resolver that needs no DNS. */
  mcpNetwork?: McpNetworkOverrides;
}

export function features(options: FeatureOptions = {}) {
  return [
    platformFeature,
    identityFeature,
    runsFeature,
    slackFeature,
    githubFeature,
    createMcpFeature({ network: options.mcpNetwork }),
  ] as const satisfies readonly Feature[];
}

/** The descriptors as the root uses them: each part receives its own feature's settings. */
export function descriptors(options: FeatureOptions = {}): readonly Feature[] {
  return features(options);
}

/** Every feature's custom search attributes, registered on the dev server and at start-up. */
export const SEARCH_ATTRIBUTES = descriptors().flatMap((feature) => feature.searchAttributes ?? []);

/** Every feature's workflow module, bundled for the worker. */
export const WORKFLOW_MODULES = descriptors().flatMap((feature) => (feature.workflows ? [feature.workflows] : []));
