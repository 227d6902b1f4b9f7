import { patched, proxyActivities, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { GithubActivities } from '../activities/github';
import { deliverySearchAttributes, summarize } from '../src/github/delivery';
import {
  GITHUB_LOCAL_EFFECTS_PATCH,
  githubSearchAttributes,
  type GithubDeliveryInput,
  type GithubDeliverySummary,
} from '../src/github/contract';
import { LOCAL_POSTGRES_EFFECT, localFirst } from './local-first';

// Retries are unbounded on purpose: the delivery was acknowledged to GitHub, which never
// redelivers by itself, so the effects must eventually land (e.g. after a Postgres outage).
const UNBOUNDED_RETRY = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' } as const;
const activities = proxyActivities<GithubActivities>({ startToCloseTimeout: '30s', retry: UNBOUNDED_RETRY });
// The effect is a few milliseconds of Postgres: locally first, which saves the history three
// events and a round trip through the task queue; after 10 s of failures, the same
// effect as a regular activity, still retried without bound.
const effect = localFirst<GithubActivities>(LOCAL_POSTGRES_EFFECT, { startToCloseTimeout: '30s', retry: UNBOUNDED_RETRY });

/** One workflow per GitHub delivery (id `github-delivery/{deliveryId}`): apply its table effects. */
export async function githubDelivery(input: GithubDeliveryInput): Promise<GithubDeliverySummary> {
  if (!patched(GITHUB_LOCAL_EFFECTS_PATCH)) return deliverBeforeLocalEffects(input);
  // The API passes the search attributes at start; a delivery started by an older API has none.
  if (workflowInfo().typedSearchAttributes.get(githubSearchAttributes.GithubEvent) === undefined) {
    upsertSearchAttributes(deliverySearchAttributes(input));
  }
  switch (input.event) {
    case 'push':
      return summarize(input, await effect('githubRecordPush', input));
    case 'repository':
      return summarize(input, await effect('githubApplyRepositoryChange', input));
    case 'installation':
      return summarize(input, await effect('githubApplyInstallationChange', input));
    case 'installation_repositories':
      return summarize(input, await effect('githubApplyInstallationRepositories', input));
  }
}

/** Deliveries that started before GITHUB_LOCAL_EFFECTS_PATCH replay this way. */
async function deliverBeforeLocalEffects(input: GithubDeliveryInput): Promise<GithubDeliverySummary> {
  upsertSearchAttributes(deliverySearchAttributes(input));
  switch (input.event) {
    case 'push':
      return summarize(input, await activities.githubRecordPush(input));
    case 'repository':
      return summarize(input, await activities.githubApplyRepositoryChange(input));
    case 'installation':
      return summarize(input, await activities.githubApplyInstallationChange(input));
    case 'installation_repositories':
      return summarize(input, await activities.githubApplyInstallationRepositories(input));
  }
}
