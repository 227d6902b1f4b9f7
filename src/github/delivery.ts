/**
 * Deterministic helpers of the delivery workflow (workflows/github.ts), kept here so
 * they are unit-testable without a worker. No I/O: workflow code imports this module.
 */
import type { SearchAttributePair } from '@temporalio/common';
import { githubSearchAttributes, type GithubDeliveryInput, type GithubDeliverySummary } from './contract';

/** The repository an operator would search a delivery by, when it names exactly one. */
function deliveryRepository(input: GithubDeliveryInput): string | undefined {
  if (input.event === 'push' || input.event === 'repository') return input.repository.fullName;
  if (input.event === 'installation_repositories' && input.repositories.length === 1) return input.repositories[0]!.fullName;
  return undefined;
}

/** Values of the GithubEvent / GithubDeliveryId / GithubRepository search attributes. */
export function deliverySearchValues(input: GithubDeliveryInput): {
  GithubEvent: string;
  GithubDeliveryId: string;
  GithubRepository?: string;
} {
  const repository = deliveryRepository(input);
  return {
    GithubEvent: input.event,
    GithubDeliveryId: input.deliveryId,
    ...(repository === undefined ? {} : { GithubRepository: repository }),
  };
}

/** The same, as typed pairs: passed at start by the route (and upserted only by older workflows). */
export function deliverySearchAttributes(input: GithubDeliveryInput): SearchAttributePair[] {
  const values = deliverySearchValues(input);
  return [
    { key: githubSearchAttributes.GithubEvent, value: values.GithubEvent },
    { key: githubSearchAttributes.GithubDeliveryId, value: values.GithubDeliveryId },
    ...(values.GithubRepository === undefined ? [] : [{ key: githubSearchAttributes.GithubRepository, value: values.GithubRepository }]),
  ];
}

export function summarize(
  input: GithubDeliveryInput,
  effects: Pick<GithubDeliverySummary, 'syncEvents' | 'targetChanges' | 'repositoriesRecorded'>,
): GithubDeliverySummary {
  return {
    deliveryId: input.deliveryId,
    event: input.event,
    action: input.action,
    syncEvents: effects.syncEvents,
    targetChanges: effects.targetChanges,
    repositoriesRecorded: effects.repositoriesRecorded,
  };
}
