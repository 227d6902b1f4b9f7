/** Identity: API keys, sessions and runner tokens resolve to a principal; runners and their tokens; the `den` identity commands. */
import { defineFeature } from '../app/feature';
import { createAuthenticator } from './auth';
import { registerIdentityCommands } from './cli';
import { createIdentityRoutes } from './routes';

export { fairnessWeight, liveMember } from './store';
export { findRunner, issueRunnerToken, liveRunners, revokeRunner, type RunnerTokenGrant } from './runner-tokens';

export const identityFeature = defineFeature({
  name: 'identity',
  routes: (deps) => createIdentityRoutes(deps),
  authenticator: (deps) => createAuthenticator(deps),
  cli: registerIdentityCommands,
});
