/** Slack: signed events and slash commands, account links. */
import type { Feature } from '../app/feature';
import { SlackQuota } from './quota';
import { createSlackRoutes, type SlackRouteDeps } from './routes';

export { slackSearchAttributes } from './contract';
export { registerSlackCommands } from './cli';
export { resealSlackSecrets } from './connections';

/** What the composition root passes; the feature builds its own stores from them. */
export type SlackFeatureDeps = Omit<SlackRouteDeps, 'quota'>;

export function createSlackFeature(deps: SlackFeatureDeps): Feature {
  return { name: 'slack', routes: createSlackRoutes({ ...deps, quota: new SlackQuota(deps.db, deps.log) }) };
}
