/**
 * The heartbeat coalescers of this process, so a cancel any of its routes took (the runs API's
 * own, or Slack's Cancel button and `/den cancel`) reaches the run's coalesced heartbeats at once,
 * not one coalescing window later. Weakly held: a coalescer lives as long as its routes.
 */
import type { HeartbeatCoalescer } from './heartbeat-coalescer';

const coalescers = new Set<WeakRef<HeartbeatCoalescer>>();

export function registerCoalescer(coalescer: HeartbeatCoalescer): HeartbeatCoalescer {
  coalescers.add(new WeakRef(coalescer));
  return coalescer;
}

/** A cancel of the run was taken in this process: its coalesced heartbeats say so from now on. */
export function noteRunCancelRequested(organizationId: string, runId: string): void {
  for (const ref of coalescers) {
    const coalescer = ref.deref();
    if (coalescer === undefined) coalescers.delete(ref);
    else coalescer.noteCancelRequested(organizationId, runId);
  }
}
