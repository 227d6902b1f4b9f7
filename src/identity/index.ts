/** Identity: API keys and sessions resolve to a principal; the `den` identity commands. */
import type { Feature } from '../app/feature';
import type { Logger } from '../app/log';
import type { Db } from '../app/store/db';
import { createAuthenticator } from './auth';
import { createIdentityRoutes } from './routes';

export { registerIdentityCommands } from './cli';
export { liveMember } from './store';

export function createIdentityFeature(deps: { db: Db; log: Logger; now: () => number }): Feature & {
  authenticate: ReturnType<typeof createAuthenticator>;
} {
  return { name: 'identity', routes: createIdentityRoutes(deps), authenticate: createAuthenticator(deps) };
}
