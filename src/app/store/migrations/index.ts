import type { Migration } from 'kysely';
import * as identity from './0001_identity';
import * as runs from './0002_runs';
import * as slack from './0003_slack';
import * as github from './0004_github';
import * as runClaims from './0005_run_claims';
import * as slackQuotas from './0006_slack_quotas';
import * as replays from './0007_replays';
import * as githubSync from './0008_github_sync';
import * as fairnessAdmission from './0009_fairness_admission';
import * as githubReconcile from './0010_github_reconcile';
import * as installationBindings from './0011_installation_bindings';
import * as slackDelivery from './0012_slack_delivery';
import * as githubLimits from './0013_github_limits';
import * as slackOnboarding from './0014_slack_onboarding';
import * as engineCapacity from './0015_engine_capacity';
import * as runners from './0016_runners';
import * as githubRound2 from './0017_github_round2';
import * as slackConversation from './0018_slack_conversation';
import * as slackTokenRotation from './0019_slack_token_rotation';
import * as slackDeferredEvents from './0020_slack_deferred_events';

/** Ordered by name. Never edit a migration that has shipped: add a new one. */
export const migrations: Record<string, Migration> = {
  '0001_identity': identity,
  '0002_runs': runs,
  '0003_slack': slack,
  '0004_github': github,
  '0005_run_claims': runClaims,
  '0006_slack_quotas': slackQuotas,
  '0007_replays': replays,
  '0008_github_sync': githubSync,
  '0009_fairness_admission': fairnessAdmission,
  '0010_github_reconcile': githubReconcile,
  '0011_installation_bindings': installationBindings,
  '0012_slack_delivery': slackDelivery,
  '0013_github_limits': githubLimits,
  '0014_slack_onboarding': slackOnboarding,
  '0015_engine_capacity': engineCapacity,
  '0016_runners': runners,
  '0017_github_round2': githubRound2,
  '0018_slack_conversation': slackConversation,
  '0019_slack_token_rotation': slackTokenRotation,
  '0020_slack_deferred_events': slackDeferredEvents,
};
