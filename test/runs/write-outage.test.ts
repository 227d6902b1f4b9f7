/**
 * Postgres refuses a run's writes while it still answers reads (a read-only failover, a full
 * disk, a revoked privilege). A trigger refuses the writes of one organization only,
 * as Postgres would (SQLSTATE 25006), so the rest of the suite is untouched:
 * - reports keep being acked while the run's unpersisted backlog is small, then get 503 for
 *   that run, so senders retry instead of piling acked work into the workflow's history;
 * - nothing acked is lost: once writes work again, every acked event reaches the log;
 * - a batch Postgres will never take (a constraint error) is set apart instead of retried forever.
 */
import { sql } from 'kysely';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runResult, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ worker: true, env: { RUN_UNPERSISTED_MAX_EVENTS: '5' } });
  const db = stack.services.database.db;
  await sql`CREATE TABLE IF NOT EXISTS den_test_refused_orgs (organization_id text PRIMARY KEY, code text NOT NULL)`.execute(db);
  await sql`CREATE OR REPLACE FUNCTION den_test_refuse_writes() RETURNS trigger AS $$
    DECLARE refusal text;
    BEGIN
      SELECT code INTO refusal FROM den_test_refused_orgs WHERE organization_id = NEW.organization_id;
      IF refusal = '25006' THEN RAISE EXCEPTION 'writes refused (test)' USING ERRCODE = '25006'; END IF;
      IF refusal = '23514' AND TG_TABLE_NAME = 'automation_run_events' THEN
        -- Nested: automation_runs has no payload column to look at.
        IF NEW.payload::text LIKE '%poison%' THEN RAISE EXCEPTION 'poison (test)' USING ERRCODE = '23514'; END IF;
      END IF;
      RETURN NEW;
    END $$ LANGUAGE plpgsql`.execute(db);
  for (const table of ['automation_runs', 'automation_run_events']) {
    await sql`DROP TRIGGER IF EXISTS den_test_refuse_writes ON ${sql.table(table)}`.execute(db);
    await sql`CREATE TRIGGER den_test_refuse_writes BEFORE INSERT OR UPDATE ON ${sql.table(table)} FOR EACH ROW EXECUTE FUNCTION den_test_refuse_writes()`.execute(
      db,
    );
  }
});
afterAll(async () => {
  const db = stack.services.database.db;
  for (const table of ['automation_runs', 'automation_run_events'])
    await sql`DROP TRIGGER IF EXISTS den_test_refuse_writes ON ${sql.table(table)}`.execute(db);
  await stack.stop();
});

const refuse = (organizationId: string, code: '25006' | '23514') =>
  sql`INSERT INTO den_test_refused_orgs VALUES (${organizationId}, ${code}) ON CONFLICT (organization_id) DO UPDATE SET code = EXCLUDED.code`.execute(
    stack.services.database.db,
  );
const allow = (organizationId: string) =>
  sql`DELETE FROM den_test_refused_orgs WHERE organization_id = ${organizationId}`.execute(stack.services.database.db);

it('acks while the backlog is small, then answers 503 for that run; nothing acked is lost once writes work again', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const runId = newRunId();
  await refuse(org.organizationId, '25006');

  const statuses: number[] = [];
  for (let sequence = 1; sequence <= 24; sequence++) {
    const res = await runs.postEvent(runId, event(1, sequence));
    statuses.push(res.status);
    if (res.status === 503) expect(res.json).toMatchObject({ error: 'unavailable', dependency: 'postgres' });
    if (res.status !== 200) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const acked = statuses.filter((status) => status === 200).length;
  expect(statuses.at(-1)).toBe(503);
  // The bound (5) plus what one verdict's second lets through.
  expect(acked).toBeGreaterThanOrEqual(5);
  expect(acked).toBeLessThanOrEqual(10);
  // Reads still work: heartbeats carry no data and keep going.
  expect((await runs.heartbeat(runId, 1)).status).toBe(200);

  await allow(org.organizationId);
  const stored = await waitFor(
    async () => {
      const res = await runs.events(runId, '?limit=100');
      return res.status === 200 && res.json.events.length === acked ? (res.json.events as { sequence: number }[]) : undefined;
    },
    30_000,
    { what: 'every acked event in Postgres' },
  );
  expect(stored.map((e) => e.sequence)).toEqual(Array.from({ length: acked }, (_, i) => i + 1));
  // Admitted again once the backlog is gone.
  await waitFor(async () => (await runs.postEvent(runId, event(1, acked + 1))).status === 200, 10_000, { what: 'events admitted again' });
}, 90_000);

it('a batch Postgres will never take is set apart, not retried forever: the run goes on', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const runs = runsClient(stack, org.owner.headers);
  const runId = newRunId();
  await refuse(org.organizationId, '23514');
  expect((await runs.postEvent(runId, event(1, 1, 'user', { text: 'poison' }))).status).toBe(200);
  await waitFor(async () => (await runs.get(runId)).json?.eventCount === 1);
  // Give the rejected batch its one (non-retried) attempt, then finish the run.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect((await runs.postEvent(runId, event(1, 2, 'terminal'))).status).toBe(200);
  expect(await runResult(stack, org.organizationId, runId)).toMatchObject({ status: 'succeeded', eventCount: 2 });
  const stored = (await runs.events(runId)).json.events as { sequence: number }[];
  expect(stored.map((e) => e.sequence)).toEqual([2]);
  expect(stack.logs.some((line) => line.msg === 'Postgres rejected a run batch permanently' && line.code === '23514')).toBe(true);
  await allow(org.organizationId);
}, 60_000);
