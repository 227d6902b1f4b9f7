/** Identity: API keys and sessions resolve to a principal; the `den` identity commands. */
import { defineFeature } from '../app/feature';
import { createAuthenticator } from './auth';
import { registerIdentityCommands } from './cli';
import { createIdentityRoutes } from './routes';

export { fairnessWeight, liveMember } from './store';

export const identityFeature = defineFeature({
  name: 'identity',
  routes: (deps) => createIdentityRoutes(deps),
  authenticator: (deps) => createAuthenticator(deps),
  cli: registerIdentityCommands,
});
