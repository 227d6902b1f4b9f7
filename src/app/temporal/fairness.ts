/**
 * Fair dispatch per organization. Every workflow the service starts carries its organization as
 * its Temporal fairness key; the task queue's matcher (server dynamic config
 * `matching.enableFairness`) then dispatches round-robin across keys in proportion to their
 * weights instead of first in, first out, so one organization's backlog does not delay
 * another's. Children and activities inherit the key from the workflow that starts them.
 *
 * Weights come from Postgres (an organization's `fairness_weight`), read at start time through a
 * short cache, so an operator changes one with `den` and no deploy. The same weight scales the
 * organization's admission rate at the front door (src/app/admission.ts). Temporal v1.29.1 has no
 * task-queue API for weight overrides, so the weight travels on each start.
 */
import type { Priority } from '@temporalio/common';
import { boundedCache } from '../bounded-caches';
import type { Logger } from '../log';

/** The server flags that turn Fairness on; the production topology sets the same in its dynamic config. */
export const FAIRNESS_DYNAMIC_CONFIG: readonly string[] = ['matching.enableFairness=true'];

/** Temporal clamps weights to this range. */
const MIN_WEIGHT = 0.001;
const MAX_WEIGHT = 1000;
/** Fairness keys are at most 64 bytes. */
const MAX_KEY_BYTES = 64;

/** What metrics may say of an organization: its weight's class, never its id. */
export type TenantClass = 'default' | 'raised' | 'lowered';

export function tenantClass(weight: number): TenantClass {
  if (weight > 1) return 'raised';
  if (weight < 1) return 'lowered';
  return 'default';
}

export function clampWeight(weight: number): number {
  return Math.min(MAX_WEIGHT, Math.max(MIN_WEIGHT, weight));
}

/** The key for a tenant: its id, cut to the 64 bytes Temporal takes (the ids used here are far shorter). */
export function fairnessKey(tenant: string): string {
  return Buffer.byteLength(tenant) <= MAX_KEY_BYTES ? tenant : Buffer.from(tenant).subarray(0, MAX_KEY_BYTES).toString('latin1');
}

export interface Fairness {
  /** The priority a start for this tenant carries, or undefined when keys are switched off. */
  priority(tenant: string): Promise<Priority | undefined>;
  /**
   * The tenant's weight (1 unless an operator set one), whether or not keys are switched on: it is
   * also the tenant's share of the front door's rate (src/app/admission.ts).
   */
  weight(tenant: string): Promise<number>;
}

export interface FairnessOptions {
  /** TEMPORAL_FAIRNESS: off, starts carry no key and the queue is first in, first out. */
  enabled: boolean;
  /** How long a weight read from Postgres is used before it is read again. */
  cacheTtlMs: number;
  /** An organization's weight, undefined for the default (1). */
  loadWeight: (tenant: string) => Promise<number | undefined>;
  log: Logger;
  now?: () => number;
}

/** At most this many weights cached; beyond it the least recently used goes. */
const MAX_WEIGHTS = 10_000;

export function createFairness(options: FairnessOptions): Fairness {
  const now = options.now ?? (() => Date.now());
  // Kept past their TTL on purpose: a weight that cannot be read again falls back to the last one known.
  const cache = boundedCache<{ weight: number; at: number }>({ max: MAX_WEIGHTS });
  const weightOf = async (tenant: string): Promise<number> => {
    const hit = cache.get(tenant);
    if (hit && now() - hit.at < options.cacheTtlMs) return hit.weight;
    let weight = hit?.weight ?? 1;
    try {
      weight = clampWeight((await options.loadWeight(tenant)) ?? 1);
    } catch (error) {
      // A weight is a preference, never a reason to refuse work: keep the last one known.
      options.log.warn({ err: error }, 'fairness weight not read; using the last known');
    }
    cache.set(tenant, { weight, at: now() });
    return weight;
  };
  return {
    priority: async (tenant) => {
      if (!options.enabled) return undefined;
      const weight = await weightOf(tenant);
      return { fairnessKey: fairnessKey(tenant), ...(weight === 1 ? {} : { fairnessWeight: weight }) };
    },
    weight: weightOf,
  };
}
