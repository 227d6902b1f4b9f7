/** GitHub routes, one module each: the App webhook, the sync-event listing, the targets, and the installations and their install flow. */
import type { Route } from '../../app/http/route';
import type { GithubRouteDeps } from './shared';
import { createSyncEventsRoute } from './sync-events';
import { createWebhookRoute } from './webhook';
import { createCreateTargetRoute } from './create-target';
import { createDeleteTargetRoute } from './delete-target';
import { createGetTargetRoute } from './get-target';
import { createListTargetsRoute } from './list-targets';
import { createSyncTargetRoute } from './sync-target';
import { createTargetFilesRoute } from './target-files';
import { createInstallUrlRoute } from './install-url';
import { createListInstallationsRoute } from './list-installations';
import { createSetupRoute } from './setup';

export type { GithubRouteDeps } from './shared';

export function createGithubRoutes(deps: GithubRouteDeps): Route[] {
  return [
    createWebhookRoute(deps),
    createSyncEventsRoute(deps),
    createCreateTargetRoute(deps),
    createListTargetsRoute(deps),
    createGetTargetRoute(deps),
    createTargetFilesRoute(deps),
    createSyncTargetRoute(deps),
    createDeleteTargetRoute(deps),
    createListInstallationsRoute(deps),
    createInstallUrlRoute(deps),
    createSetupRoute(deps),
  ];
}
