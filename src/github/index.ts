/** GitHub App webhooks: verified deliveries become durable sync work. */
import path from 'node:path';
import { defineFeature } from '../app/feature';
import { createGithubActivities } from '../../activities/github';
import { registerGithubCommands } from './cli';
import { githubReconcileScheduleId, githubReconcileWorkflow, githubSearchAttributes } from './contract';
import { createGithubApi } from './api';
import { createInstallerClient } from './oauth';
import { createGithubRoutes } from './routes';
import { createTenantResolver } from './tenant';
import { githubSettings } from './settings';

export const githubFeature = defineFeature({
  name: 'github',
  settings: githubSettings,
  workflows: path.join(__dirname, '..', '..', 'workflows', 'github'),
  searchAttributes: Object.values(githubSearchAttributes),
  routes: (deps) =>
    createGithubRoutes({
      ...deps,
      tenantOf: createTenantResolver(deps.db, deps.now),
      api: deps.settings.app ? createGithubApi(deps.settings.app, deps.settings.apiBaseUrl) : undefined,
      installer: deps.settings.install
        ? createInstallerClient({ ...deps.settings.install, apiBaseUrl: deps.settings.apiBaseUrl })
        : undefined,
    }),
  activities: (deps) => createGithubActivities(deps),
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
