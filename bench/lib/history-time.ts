import type { temporal } from '@temporalio/proto';

/** When a history event was written, in ms since the epoch (Temporal's timestamps are seconds and nanos). */
export function historyEventMs(event: temporal.api.history.v1.IHistoryEvent): number {
  return Number(event.eventTime?.seconds ?? 0) * 1000 + Math.floor((event.eventTime?.nanos ?? 0) / 1e6);
}
