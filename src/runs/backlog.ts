/**
 * Admission by backlog: while Postgres refuses a run's writes, its workflow keeps
 * every acked event in memory and in its history. Past a bound, the front door answers 503 for
 * that run, so senders retry later instead of piling up acked work that could outgrow the
 * history. Checked only when the run's row looks stale (its workflow has not written it for a
 * while, or it has no row yet): then the workflow's own query says how much is unpersisted.
 * Healthy runs, whose rows move with every batch, never pay for the check.
 */
import { boundedCache } from '../app/bounded-caches';
import { errors } from '../app/errors';
import { runSummaryQuery, runWorkflowId } from './contract';
import type { RunDeps } from './deps';
import type { RunRow } from './store';

/** A row this old (or none) is worth asking the workflow about. */
const BACKLOG_CHECK_AFTER_MS = 5_000;
/** A verdict is reused this long per run and process, so an outage does not turn into a query storm. */
const VERDICT_TTL_MS = 1_000;
/** Unpersisted payload bytes past which a run takes no more events (its history must stay small). */
const UNPERSISTED_MAX_BYTES = 1024 * 1024;

export class BacklogGate {
  private readonly verdicts = boundedCache<{ at: number; backlogged: boolean }>({ max: 10_000 });

  constructor(private readonly deps: RunDeps) {}

  async admit(organizationId: string, runId: string, row: RunRow | undefined): Promise<void> {
    const now = this.deps.now();
    if (row && now - row.updatedAt.getTime() < BACKLOG_CHECK_AFTER_MS) return;
    const key = `${organizationId}\u0000${runId}`;
    let verdict = this.verdicts.get(key);
    if (!verdict || now - verdict.at >= VERDICT_TTL_MS) {
      verdict = { at: now, backlogged: await this.backlogged(organizationId, runId) };
      this.verdicts.set(key, verdict);
    }
    // Postgres is what is not taking the run's writes: retry later, nothing was recorded.
    if (verdict.backlogged) throw errors.unavailable('postgres');
  }

  private async backlogged(organizationId: string, runId: string): Promise<boolean> {
    const { ingress, settings } = this.deps;
    const summary = await ingress.query({ id: runWorkflowId(organizationId, runId), query: runSummaryQuery, args: [] });
    if (!summary) return false; // A new run: nothing is pending.
    const unpersisted = summary.unpersisted ?? { events: 0, bytes: 0 };
    return unpersisted.events >= settings.admission.unpersistedMaxEvents || unpersisted.bytes >= UNPERSISTED_MAX_BYTES;
  }
}
