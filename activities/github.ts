import type { ActivityDeps } from './deps';

export function createGithubActivities(_deps: ActivityDeps) {
  return {};
}
