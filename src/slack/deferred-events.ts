/**
 * A Slack event's workflow, started without making Slack wait for a busy engine. Slack wants its
 * answer within 3 s, retries a failed delivery only three times and keeps no log to recover it
 * from, so an event must not be refused because Temporal is slow to take its workflow (another
 * organization's flood, a saturated engine) or unreachable. The events route asks Temporal to
 * start the workflow and waits for it at most SLACK_EVENT_ACK_WAIT; past that, or when the start
 * fails, the event is kept in Postgres (`slack_deferred_events`, keyed by its workflow id) and
 * acknowledged: durably held, as an ack must be. The start under way goes on, and deletes the row
 * once Temporal holds the workflow; if it fails, the worker's sweep starts it later, oldest first,
 * on every worker at once without two taking the same row. A workflow id is started at most once
 * (REJECT_DUPLICATE), so a row started twice, or a retry of the event from Slack, changes nothing.
 */
import { sql } from 'kysely';
import type { IngressGateway, StartOutcome, Tenancy } from '../app/ingress';
import type { Logger } from '../app/log';
import type { Db } from '../app/store/db';
import { slackEventWorkflow, slackSearchAttributes, type SlackEventInput } from './contract';

/** How long a start under way holds its row before a sweep may start it again (past TEMPORAL_START_TIMEOUT and its overshoot). */
const START_LEASE_MS = 15_000;
/** Rows one sweep takes at most. */
const SWEEP_BATCH = 100;

/**
 * An event's tenancy: its organization's fairness key, and never shed for its share. Slack
 * already bounds what it sends (30,000 events per workspace an hour): a refusal here would lose a
 * mention. Its processing waits its turn among the organizations on the task queue.
 */
const tenancyOf = (input: SlackEventInput): Tenancy => ({ tenant: input.organizationId, admission: 'bypass' });

/** Starts the event's workflow, its search attributes known at start. */
function startEvent(ingress: IngressGateway, workflowId: string, input: SlackEventInput): Promise<StartOutcome> {
  return ingress.start({
    workflow: slackEventWorkflow,
    id: workflowId,
    args: [input],
    tenancy: tenancyOf(input),
    searchAttributes: [
      { key: slackSearchAttributes.ConnectionId, value: input.connectionId },
      { key: slackSearchAttributes.SlackEventStatus, value: 'received' },
      ...(input.invocation ? [{ key: slackSearchAttributes.SlackUserId, value: input.invocation.user }] : []),
    ],
  });
}

/** How an event was taken: its workflow started (or started before), or kept in Postgres for it. */
export type TakenOutcome = StartOutcome | 'deferred';

export interface IntakeDeps {
  db: Db;
  ingress: IngressGateway;
  log: Pick<Logger, 'debug' | 'warn'>;
  /** SLACK_EVENT_ACK_WAIT. */
  ackWaitMs: number;
}

/**
 * The event's workflow started, or the event kept in Postgres when Temporal does not take it
 * within `ackWaitMs` (or fails): `deferred`, or `duplicate` when it was kept already (a retry of an
 * event still waiting). Throws only when Postgres cannot keep it either.
 */
export async function startOrDefer(deps: IntakeDeps, workflowId: string, input: SlackEventInput): Promise<TakenOutcome> {
  const starting = startEvent(deps.ingress, workflowId, input);
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<'waited'>((resolve) => {
    timer = setTimeout(() => resolve('waited'), deps.ackWaitMs);
  });
  const first = await Promise.race([
    starting.then(
      (outcome) => ({ outcome }),
      (error: unknown) => ({ error }),
    ),
    waited,
  ]).finally(() => clearTimeout(timer));
  if (first !== 'waited' && 'outcome' in first) return first.outcome;
  const kept = await deferEvent(deps.db, workflowId, input);
  deps.log.debug({ workflowId, error: first === 'waited' ? 'slow' : first.error }, 'slack event kept until Temporal takes it');
  // The start under way goes on: once Temporal holds the workflow the row is not needed.
  starting.then(
    () => forgetDeferred(deps.db, workflowId).catch(() => undefined),
    () => undefined,
  );
  return kept;
}

/** Keeps the event for its workflow; `duplicate` when it is kept already. */
async function deferEvent(db: Db, workflowId: string, input: SlackEventInput): Promise<'deferred' | 'duplicate'> {
  const inserted = await db
    .insertInto('slack_deferred_events')
    .values({
      workflow_id: workflowId,
      connection_id: input.connectionId,
      organization_id: input.organizationId,
      input: JSON.stringify(input),
      received_at: new Date(input.receivedAt),
      next_attempt_at: sql<Date>`now() + ${`${START_LEASE_MS} milliseconds`}::interval`,
    })
    .onConflict((oc) => oc.column('workflow_id').doNothing())
    .returning('workflow_id')
    .executeTakeFirst();
  return inserted ? 'deferred' : 'duplicate';
}

async function forgetDeferred(db: Db, workflowId: string): Promise<void> {
  await db.deleteFrom('slack_deferred_events').where('workflow_id', '=', workflowId).execute();
}

/**
 * The worker's sweep: the events due, oldest first (each held for START_LEASE_MS, so no other
 * worker takes it meanwhile), started; each started, or found started already, is deleted, and
 * one Temporal still does not take waits for the next sweep after its lease. Counts what it did.
 */
export async function startDeferredEvents(deps: Pick<IntakeDeps, 'db' | 'ingress' | 'log'>): Promise<{ started: number; failed: number }> {
  const due = await sql<{ workflow_id: string; input: SlackEventInput; attempts: number }>`
    UPDATE slack_deferred_events
    SET next_attempt_at = now() + ${`${START_LEASE_MS} milliseconds`}::interval, attempts = attempts + 1
    WHERE workflow_id IN (
      SELECT workflow_id FROM slack_deferred_events
      WHERE next_attempt_at <= now()
      ORDER BY received_at
      LIMIT ${SWEEP_BATCH}
      FOR UPDATE SKIP LOCKED
    )
    RETURNING workflow_id, input, attempts`.execute(deps.db);
  const counts = { started: 0, failed: 0 };
  for (const row of [...due.rows].sort((a, b) => a.input.receivedAt - b.input.receivedAt)) {
    try {
      await startEvent(deps.ingress, row.workflow_id, row.input);
      await forgetDeferred(deps.db, row.workflow_id);
      counts.started += 1;
    } catch (error) {
      counts.failed += 1;
      deps.log.warn({ err: error, workflowId: row.workflow_id, attempts: row.attempts }, 'a kept slack event could not be started yet');
    }
  }
  return counts;
}
