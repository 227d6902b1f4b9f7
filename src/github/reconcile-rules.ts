/**
 * The reconcile's rules, pure: which window of the App's delivery log to read, which failed
 * deliveries to ask GitHub to redeliver, and whether a target's branch moved without us.
 */
import type { HookDelivery } from './api';

/** GitHub keeps (and redelivers) an App's deliveries for three days. */
export const DELIVERY_LOG_WINDOW_MS = 3 * 24 * 3600_000;

/** Deliveries at or after the last reconcile's listing, never older than GitHub still redelivers. */
export function reconcileSince(lastRunAt: number | undefined, now: number): number {
  return Math.max(lastRunAt ?? 0, now - DELIVERY_LOG_WINDOW_MS);
}

const succeeded = (d: HookDelivery) => d.statusCode >= 200 && d.statusCode < 300;

/**
 * One delivery id per GUID whose every attempt failed (the newest attempt), none for a GUID that
 * any attempt delivered: each lost delivery is asked for once, and a delivered one never again.
 */
export function pickRedeliveries(deliveries: readonly HookDelivery[]): number[] {
  const byGuid = new Map<string, HookDelivery[]>();
  for (const delivery of deliveries) byGuid.set(delivery.guid, [...(byGuid.get(delivery.guid) ?? []), delivery]);
  const picked: number[] = [];
  for (const attempts of byGuid.values()) {
    if (attempts.some(succeeded)) continue;
    picked.push(Math.max(...attempts.map((a) => a.id)));
  }
  return picked.sort((a, b) => a - b);
}

/** The branch a target follows: its own ref, else the last ref a push named; only branches have a head. */
export function branchOf(ref: string | null, lastRef: string | null): string | undefined {
  const branch = ref ?? lastRef;
  return branch !== null && branch.startsWith('refs/heads/') ? branch : undefined;
}

/** A head that is neither the synced one nor one waiting for its sync was moved without a delivery we kept. */
export function headDrifted(head: string, target: { syncedSha: string | null; pendingSha: string | null }): boolean {
  return head !== target.syncedSha && head !== target.pendingSha;
}
