/**
 * The activities' type as workflows proxy it (`Activities`). The worker registers each feature's
 * activities through its descriptor (src/main/compose.ts); this union only types the proxies.
 */
import type { createGithubActivities } from './github';
import type { createMcpActivities } from './mcp';
import type { createPlatformActivities } from './platform';
import type { createRunActivities } from './runs';
import type { createSlackActivities } from './slack';

export type Activities = ReturnType<typeof createPlatformActivities> &
  ReturnType<typeof createRunActivities> &
  ReturnType<typeof createSlackActivities> &
  ReturnType<typeof createGithubActivities> &
  ReturnType<typeof createMcpActivities>;
