import type { ActivityDeps } from './deps';

export function createMcpActivities(_deps: ActivityDeps) {
  return {};
}
