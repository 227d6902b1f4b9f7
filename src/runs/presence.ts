/**
 * Which runtimes are there. A runtime is online while it long-polls a claim or heartbeats a run
 * within RUNNER_PRESENCE_WINDOW. Presence is kept in Postgres (`runner_presence`), where every API
 * process sees it, and written off the request's path, at most once per half window per runtime
 * and process, plus once for each run it is first seen working on (a claim, or a heartbeat of a run
 * this process has not seen it on): never once per heartbeat. Half a window, not a whole one, so a
 * runtime that calls at least every half window never looks offline between two writes, and one
 * that stops is offline within a window of its last call.
 *
 * A runtime is named by its credential: a runner token's runner (its id and label), or for an API
 * key, the key's id plus the label the runtime sends in `x-den-runtime-label` (a key that runs two
 * labelled runtimes shows two). Either may send its version in `x-den-runtime-version`. A session is
 * a person, not a runtime: it has no presence.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { sql } from 'kysely';
import { boundedCache } from '../app/bounded-caches';
import type { Principal } from '../app/http/auth';
import type { Logger } from '../app/log';
import type { Metrics } from '../app/metrics';
import type { Db } from '../app/store/db';

export const RUNTIME_LABEL_HEADER = 'x-den-runtime-label';
const RUNTIME_VERSION_HEADER = 'x-den-runtime-version';

/** Runtimes whose last write each process remembers; past it, the least recently seen is written again sooner. */
const TRACKED_RUNTIMES_MAX = 10_000;
/** Runs a presence row lists, newest last. */
const RUNS_KEPT = 16;
/**
 * The runs per runtime this process remembers having written, beyond the RUNS_KEPT that Postgres
 * keeps: a runtime working on more runs than Postgres lists (one API key driving hundreds) must
 * not look new on each of them at every heartbeat, which wrote its row once per heartbeat. More
 * than RUN_CAPACITY's default, so a runtime holding every live run still writes once per run.
 */
const RUNS_REMEMBERED = 4_096;

export interface Runtime {
  runnerId: string;
  memberId: string;
  credential: 'runner_token' | 'api_key';
  label: string | null;
  version: string | null;
}

/** A header a runtime describes itself with: printable ASCII, 1 to 100 characters; anything else is ignored. */
function describing(value: string | string[] | undefined): string | null {
  const text = Array.isArray(value) ? undefined : value?.trim();
  return text !== undefined && /^[\x20-\x7e]{1,100}$/.test(text) ? text : null;
}

/** The runtime a request comes from, or undefined when its credential names none (a session). Pure. */
export function runtimeOf(principal: Principal, headers: IncomingHttpHeaders): Runtime | undefined {
  const version = describing(headers[RUNTIME_VERSION_HEADER]);
  const base = { memberId: principal.memberId, version };
  if (principal.via === 'runner_token' && principal.runner) {
    return { ...base, runnerId: principal.runner.id, credential: 'runner_token', label: principal.runner.label };
  }
  if (principal.via !== 'api_key' || principal.apiKeyId === undefined) return undefined;
  const label = describing(headers[RUNTIME_LABEL_HEADER]);
  const suffix = label === null ? '' : `.${createHash('sha256').update(label, 'utf8').digest('hex').slice(0, 12)}`;
  return { ...base, runnerId: `${principal.apiKeyId}${suffix}`, credential: 'api_key', label };
}

/** A run a runtime works on, as the presence row keeps it: `attempt:runId`. */
export const runEntry = (run: { runId: string; attempt: number }) => `${run.attempt}:${run.runId}`;

export interface PresenceDeps {
  db: Db;
  log: Logger;
  metrics: Metrics;
  now: () => number;
}

export class PresenceTracker {
  /** Per runtime: when this process last wrote its presence, and the runs it wrote with it. */
  private readonly written = boundedCache<{ at: number; runs: Set<string> }>({ max: TRACKED_RUNTIMES_MAX });

  constructor(
    private readonly deps: PresenceDeps,
    private readonly windowMs: number,
  ) {}

  /** A request of the runtime (and the run it works on, if any): written to Postgres when due, off the request's path. */
  seen(principal: Principal, headers: IncomingHttpHeaders, run?: { runId: string; attempt: number }): void {
    const runtime = runtimeOf(principal, headers);
    if (!runtime) return;
    const at = this.deps.now();
    const key = `${principal.organizationId}\u0000${runtime.runnerId}`;
    const last = this.written.get(key);
    const entry = run === undefined ? undefined : runEntry(run);
    const due = !last || at - last.at >= this.windowMs / 2 || (entry !== undefined && !last.runs.has(entry));
    if (!due) return;
    const runs = new Set(last?.runs);
    if (entry !== undefined) runs.add(entry);
    // The oldest are forgotten first (a Set keeps insertion order).
    while (runs.size > RUNS_REMEMBERED) runs.delete(runs.values().next().value!);
    this.written.set(key, { at, runs });
    this.deps.metrics.presenceWrites.inc();
    const seen = { runtime, at: new Date(at), runs: entry === undefined ? [] : [entry] };
    writePresence(this.deps.db, principal.organizationId, seen).catch((error: unknown) => {
      // Not written: the runtime's next request writes it.
      this.written.delete(key);
      this.deps.log.warn({ err: error, runnerId: runtime.runnerId }, 'could not record a runtime presence');
    });
  }
}

/** A runtime as a request showed it: when, and the runs it works on (`attempt:runId`). */
interface RuntimeSeen {
  runtime: Runtime;
  at: Date;
  runs: string[];
}

/** Upserts the runtime's row: seen now, working on these runs too (the newest RUNS_KEPT are kept). */
async function writePresence(db: Db, organizationId: string, { runtime, at, runs }: RuntimeSeen): Promise<void> {
  await sql`
    INSERT INTO runner_presence (organization_id, runner_id, member_id, credential, label, version, first_seen_at, last_seen_at, runs)
    VALUES (${organizationId}, ${runtime.runnerId}, ${runtime.memberId}, ${runtime.credential}, ${runtime.label}, ${runtime.version},
            ${at}, ${at}, ${runs}::text[])
    ON CONFLICT (organization_id, runner_id) DO UPDATE SET
      member_id = EXCLUDED.member_id,
      label = EXCLUDED.label,
      version = COALESCE(EXCLUDED.version, runner_presence.version),
      last_seen_at = GREATEST(runner_presence.last_seen_at, EXCLUDED.last_seen_at),
      runs = ARRAY(
        SELECT e FROM unnest(runner_presence.runs || EXCLUDED.runs) WITH ORDINALITY AS t(e, o)
        GROUP BY e ORDER BY max(o) DESC LIMIT ${RUNS_KEPT}
      )`.execute(db);
}

export interface PresenceRow {
  runnerId: string;
  memberId: string;
  credential: 'runner_token' | 'api_key';
  label: string | null;
  version: string | null;
  firstSeenAt: Date;
  lastSeenAt: Date;
  runs: string[];
}

/**
 * The organization's presence rows (one member's, when `memberId` is given): those of these
 * runners, and those of API-key runtimes seen since `apiKeySince` whose member is still there.
 */
export async function presenceRows(
  db: Db,
  input: { organizationId: string; memberId?: string; runnerIds: string[]; apiKeySince: Date },
): Promise<PresenceRow[]> {
  let query = db
    .selectFrom('runner_presence as p')
    .innerJoin('members as m', 'm.id', 'p.member_id')
    .select([
      'p.runner_id as runnerId',
      'p.member_id as memberId',
      'p.credential as credential',
      'p.label as label',
      'p.version as version',
      'p.first_seen_at as firstSeenAt',
      'p.last_seen_at as lastSeenAt',
      'p.runs as runs',
    ])
    .where('p.organization_id', '=', input.organizationId)
    .where('m.removed_at', 'is', null)
    .where((eb) =>
      eb.or([
        eb.and([eb('p.credential', '=', 'api_key'), eb('p.last_seen_at', '>', input.apiKeySince)]),
        ...(input.runnerIds.length > 0 ? [eb('p.runner_id', 'in', input.runnerIds)] : []),
      ]),
    );
  if (input.memberId !== undefined) query = query.where('p.member_id', '=', input.memberId);
  return query.execute();
}

/** Forgets a runtime's presence (its runner was deleted); false when there was none. */
export async function forgetPresence(db: Db, input: { organizationId: string; runnerId: string; memberId?: string }): Promise<boolean> {
  let query = db.deleteFrom('runner_presence').where('organization_id', '=', input.organizationId).where('runner_id', '=', input.runnerId);
  if (input.memberId !== undefined) query = query.where('member_id', '=', input.memberId);
  const result = await query.executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/**
 * Whether one of the member's runtimes is online: for the features that tell a member their
 * request waits for a runtime that is not there.
 */
export async function runtimeOnline(
  db: Db,
  input: { organizationId: string; memberId: string; now: number; windowMs: number },
): Promise<boolean> {
  const row = await db
    .selectFrom('runner_presence')
    .select('runner_id')
    .where('organization_id', '=', input.organizationId)
    .where('member_id', '=', input.memberId)
    .where('last_seen_at', '>', new Date(input.now - input.windowMs))
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * When one of the member's runtimes was last seen, or null when none ever was: for the features
 * that tell a member their runtime is offline since when.
 */
export async function lastRuntimeSeenAt(db: Db, input: { organizationId: string; memberId: string }): Promise<number | null> {
  const row = await db
    .selectFrom('runner_presence')
    .select((eb) => eb.fn.max('last_seen_at').as('lastSeenAt'))
    .where('organization_id', '=', input.organizationId)
    .where('member_id', '=', input.memberId)
    .executeTakeFirst();
  return row?.lastSeenAt ? new Date(row.lastSeenAt).getTime() : null;
}
