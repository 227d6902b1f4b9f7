/**
 * The activity registry. Each feature contributes a factory; the worker registers their union
 * and the workflows proxy it by type (`Activities`).
 */
import { createGithubActivities } from './github';
import { createMcpActivities } from './mcp';
import { createPlatformActivities } from './platform';
import { createRunActivities } from './runs';
import { createSlackActivities } from './slack';
import type { ActivityDeps } from './deps';

export type { ActivityDeps } from './deps';

export function createActivities(deps: ActivityDeps) {
  return {
    ...createPlatformActivities(deps),
    ...createRunActivities(deps),
    ...createSlackActivities(deps),
    ...createGithubActivities(deps),
    ...createMcpActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
