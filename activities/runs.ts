import type { ActivityDeps } from './deps';

export function createRunActivities(_deps: ActivityDeps) {
  return {};
}
