/** GitHub App webhooks: verified deliveries become durable sync work. */
import { defineFeature } from '../app/feature';
import { registerGithubCommands } from './cli';
import { githubReconcileScheduleId, githubReconcileWorkflow, githubSearchAttributes } from './contract';
import { createGithubApi } from './api';
import { createInstallerClient } from './oauth';
import { createGithubRoutes } from './routes';
import { createDeliveryResolver } from './tenant';
import { githubSettings } from './settings';

export const githubFeature = defineFeature({
  name: 'github',
  settings: githubSettings,
  searchAttributes: Object.values(githubSearchAttributes),
  routes: (deps) =>
    createGithubRoutes({
      ...deps,
      resolver: createDeliveryResolver(deps.db, deps.channels, deps.now),
      api: deps.settings.app ? createGithubApi(deps.settings.app, deps.settings.apiBaseUrl, { now: deps.now }) : undefined,
      installer: deps.settings.install
        ? createInstallerClient({ ...deps.settings.install, apiBaseUrl: deps.settings.apiBaseUrl })
        : undefined,
    }),
  // Only with App credentials: without them the reconcile could ask GitHub nothing.
  schedules: (deps) =>
    deps.settings.app
      ? [
          {
            scheduleId: githubReconcileScheduleId(deps.platform.taskQueue),
            workflow: githubReconcileWorkflow,
            workflowId: githubReconcileScheduleId(deps.platform.taskQueue),
            everyMs: deps.settings.reconcileIntervalMs,
            args: [],
          },
        ]
      : [],
  cli: registerGithubCommands,
});
