import type { ActivityDeps } from './deps';

export function createSlackActivities(_deps: ActivityDeps) {
  return {};
}
