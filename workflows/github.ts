import { proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { deliverySearchValues, summarize } from '../src/github/delivery';
import { githubSearchAttributes, type GithubDeliveryInput, type GithubDeliverySummary } from '../src/github/contract';

// Retries are unbounded on purpose: the delivery was acknowledged to GitHub, which never
// redelivers by itself, so the effects must eventually land (e.g. after a Postgres outage).
const activities = proxyActivities<Activities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
});

/** One workflow per GitHub delivery (id `github-delivery/{deliveryId}`): apply its table effects. */
export async function githubDelivery(input: GithubDeliveryInput): Promise<GithubDeliverySummary> {
  const values = deliverySearchValues(input);
  upsertSearchAttributes([
    { key: githubSearchAttributes.GithubEvent, value: values.GithubEvent },
    { key: githubSearchAttributes.GithubDeliveryId, value: values.GithubDeliveryId },
    ...(values.GithubRepository === undefined ? [] : [{ key: githubSearchAttributes.GithubRepository, value: values.GithubRepository }]),
  ]);
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
