/** Slack (spec 4.1, 4.6): signed events and slash commands, account links. */
import type { Feature } from '../app/feature';
import { createSlackRoutes, type SlackRouteDeps } from './routes';

export { slackSearchAttributes } from './contract';
export { registerSlackCommands } from './cli';
export { resealSlackSecrets } from './connections';

export function createSlackFeature(deps: SlackRouteDeps): Feature {
  return { name: 'slack', routes: createSlackRoutes(deps) };
}
