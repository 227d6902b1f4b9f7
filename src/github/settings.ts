/** The GitHub feature's settings: the webhook secret, and the one before a rotation. */
import { defineSettings, optionalString } from '../app/settings';

export const githubSettings = defineSettings(
  {
    GITHUB_WEBHOOK_SECRET: optionalString,
    GITHUB_WEBHOOK_SECRET_PREVIOUS: optionalString,
  },
  (e) => ({ webhookSecret: e.GITHUB_WEBHOOK_SECRET, webhookSecretPrevious: e.GITHUB_WEBHOOK_SECRET_PREVIOUS }),
);

export type GithubSettings = ReturnType<typeof githubSettings.build>;
