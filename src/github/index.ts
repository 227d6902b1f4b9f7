/** GitHub App webhooks: verified deliveries become durable sync work. */
import type { Feature } from '../app/feature';
import { createGithubRoutes, type GithubRouteDeps } from './routes';

export { githubSearchAttributes } from './contract';
export { registerGithubCommands } from './cli';

export function createGithubFeature(deps: GithubRouteDeps): Feature {
  return { name: 'github', routes: createGithubRoutes(deps) };
}
