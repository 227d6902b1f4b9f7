/**
 * The reconcile end to end: `den github reconcile` as a real process, the real worker, Postgres,
 * and a fake GitHub whose delivery log records what the service answered and whose redeliveries
 * really send the delivery again. Also its Schedule, created at worker start.
 */
import { randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { githubReconcileScheduleId, type GithubReconcileSummary } from '../../src/github/contract';
import { ensureFeatureSchedules } from '../../src/main/worker';
import { startFakeGithub, type FakeGithub } from '../harness/fake-github';
import { fakeGithubEnv, redeliverInto, syncedRepo, type SyncedRepo } from '../harness/github-sync';
import { createTestOrg } from '../harness/identity';
import { closedPort } from '../harness/ports';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
const BIN = path.resolve(__dirname, '..', '..', 'bin', 'den.js');
let fake: FakeGithub;
let stack: TestStack;
/** The same service while Temporal is stopped: it answers 503 to every delivery. */
let down: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;

beforeAll(async () => {
  fake = await startFakeGithub();
  stack = await startTestStack({ worker: true, env: fakeGithubEnv(fake, SECRET) });
  down = await startTestStack({
    env: { ...fakeGithubEnv(fake, SECRET), TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`, TEMPORAL_START_TIMEOUT: '1s' },
  });
  org = await createTestOrg(stack.services.database.db);
  redeliverInto(fake, () => stack);
});
afterAll(async () => {
  await down.stop();
  await stack.stop();
  await fake.close();
});

const db = () => stack.services.database.db;
const newRepo = () => syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
const FILES = { '.claude-plugin/marketplace.json': '{"name":"market","plugins":[]}', 'README.md': 'not a manifest' };

/** `den …` as an operator runs it, against the test stack's Postgres, Temporal and task queue. */
function den(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    DATABASE_URL: stack.config.database.url,
    DATA_DIR: stack.config.dataDir,
    TEMPORAL_ADDRESS: stack.config.temporal.address,
    TEMPORAL_TASK_QUEUE: stack.config.temporal.taskQueue,
    TEMPORAL_NAMESPACE: stack.config.temporal.namespace,
    LOG_LEVEL: 'silent',
  };
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function reconcile(): Promise<{ code: number; summary: GithubReconcileSummary; stderr: string }> {
  const run = await den('github', 'reconcile');
  return { ...run, summary: JSON.parse(run.stdout || 'null') as GithubReconcileSummary };
}

const targetRow = (targetId: string) =>
  db().selectFrom('github_connector_targets').selectAll().where('id', '=', targetId).executeTakeFirstOrThrow();
const eventsOf = (r: SyncedRepo) =>
  db().selectFrom('github_sync_events').selectAll().where('target_id', '=', r.targetId).orderBy('created_at').execute();
const syncedTo = (r: SyncedRepo, sha: string) =>
  waitFor(async () => (await targetRow(r.targetId)).synced_sha === sha, 20_000, { what: `${r.fullName} synced to ${sha}` });
/** Errors about this file's repositories (other suites' targets live on other fakes). */
const errorsAbout = (summary: GithubReconcileSummary, r: SyncedRepo) => summary.errors.filter((e) => e.includes(r.fullName));

it('a push refused while Temporal was stopped is asked for again exactly once, and synced once', async () => {
  const r = await newRepo();
  const first = await r.push(FILES);
  await syncedTo(r, first.sha);
  const lost = await r.pushLogged({ ...FILES, '.mcp.json': '{"mcpServers":{}}' }, down);
  expect(lost.response.status).toBe(503);

  const run = await reconcile();
  expect(run.summary.deliveriesSeen).toBe(1);
  expect(run.summary.redeliveriesAsked).toBe(1);
  expect(errorsAbout(run.summary, r)).toEqual([]);
  expect(fake.redeliveryRequests).toEqual([lost.logId]);
  await syncedTo(r, lost.sha);
  // The redelivered push ends completed, once (the branch half may have synced the head already).
  const ended = await waitFor(
    async () => {
      const events = (await eventsOf(r)).filter((e) => e.delivery_id === lost.deliveryId);
      return events.every((e) => e.status !== 'queued' && e.status !== 'running') && events;
    },
    20_000,
    { what: 'the redelivered push’s sync' },
  );
  expect(ended.map((e) => e.status)).toEqual(['completed']);
  // GitHub's log shows the redelivery with the same GUID, accepted.
  expect(fake.deliveries.find((d) => d.redelivery)).toMatchObject({ guid: lost.deliveryId, status_code: 202 });

  // Delivered now: the next reconcile asks nothing more.
  const again = await reconcile();
  expect(again.summary.redeliveriesAsked).toBe(0);
  expect(fake.redeliveryRequests).toHaveLength(1);
});

it('a branch head moved with no delivery at all is resynced by the reconcile, once', async () => {
  const r = await newRepo();
  const first = await r.push(FILES);
  await syncedTo(r, first.sha);
  const moved = fake.commit(r.fullName, r.installationId, 'master', { ...FILES, '.mcp.json': '{"mcpServers":{}}' });

  const run = await reconcile();
  expect(run.summary.targetsResynced).toBeGreaterThanOrEqual(1);
  expect(errorsAbout(run.summary, r)).toEqual([]);
  await syncedTo(r, moved);
  const reconciled = (await eventsOf(r)).filter((e) => e.event === 'reconcile');
  expect(reconciled.map((e) => e.status)).toEqual(['completed']);
  expect(reconciled[0]!.delivery_id).toMatch(/^reconcile-gse_/);
  const files = await db().selectFrom('github_target_files').select('path').where('target_id', '=', r.targetId).orderBy('path').execute();
  expect(files.map((f) => f.path)).toEqual(['.claude-plugin/marketplace.json', '.mcp.json']);

  // In step again: nothing to resync.
  await reconcile();
  expect((await eventsOf(r)).filter((e) => e.event === 'reconcile')).toHaveLength(1);
});

it('`den github targets sync` forces a full resync through the target workflow, like the route', async () => {
  const r = await newRepo();
  const first = await r.push(FILES);
  await syncedTo(r, first.sha);
  const blobs = () => fake.calls.filter((c) => c.repository === r.fullName.toLowerCase() && c.kind === 'blob').length;
  const before = blobs();
  const run = await den('github', 'targets', 'sync', '--org', org.organizationId, r.targetId);
  expect(run.stderr).toBe('');
  const { eventId } = JSON.parse(run.stdout) as { eventId: string };
  await waitFor(
    async () =>
      (await db().selectFrom('github_sync_events').select('status').where('id', '=', eventId).executeTakeFirst())?.status === 'completed',
    20_000,
    { what: 'the forced sync' },
  );
  // Full: the one manifest is fetched again although its SHA did not change.
  expect(blobs() - before).toBe(1);
  const stranger = await den('github', 'targets', 'sync', '--org', 'org_unknown', r.targetId);
  expect(stranger.code).toBe(1);
  expect(stranger.stderr).toContain('not found');
});

it('GitHub refusing the delivery log: the CLI prints the counts and the error, and exits non-zero', async () => {
  fake.fail((c) => c.kind === 'deliveries', 403);
  const run = await reconcile();
  expect(run.code).toBe(1);
  expect(run.summary.errors[0]).toMatch(/^GET \/app\/hook\/deliveries: 403 /);
  expect(run.stderr).toContain('GitHub refused: GET /app/hook/deliveries: 403');
});

it('the Schedule the worker role registers at start is created, updated idempotently, and runs the reconcile', async () => {
  const handle = stack.services.temporal.client.schedule.getHandle(githubReconcileScheduleId(stack.config.temporal.taskQueue));
  await ensureFeatureSchedules(stack.services);
  await ensureFeatureSchedules(stack.services);
  try {
    const described = await handle.describe();
    expect(described.spec.intervals).toMatchObject([{ every: 600_000 }]);
    expect(described.action).toMatchObject({ type: 'startWorkflow', workflowType: 'githubReconcile' });
    await handle.trigger();
    const started = await waitFor(async () => (await handle.describe()).info.recentActions[0]?.action.workflow, 10_000, {
      what: 'the schedule’s first action',
    });
    const summary = (await stack.services.temporal.client.workflow.getHandle(started.workflowId).result()) as GithubReconcileSummary;
    expect(Object.keys(summary).sort()).toEqual(['deliveriesSeen', 'errors', 'redeliveriesAsked', 'targetsChecked', 'targetsResynced']);
  } finally {
    await handle.delete();
  }
});
