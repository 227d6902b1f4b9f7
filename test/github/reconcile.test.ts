/**
 * The reconcile end to end: `den github reconcile` as a real process, the real worker, Postgres
 * (a database of its own, so the reconcile sees only this file's targets), and a fake GitHub
 * whose delivery log records what the service answered, pages with real cursors, and whose
 * redeliveries really send the delivery again. Also its Schedule, created at worker start.
 */
import { randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import { githubReconcileScheduleId, githubReconcileWorkflow, type GithubReconcileSummary } from '../../src/github/contract';
import { signGithubPayload } from '../../src/github/signature';
import { ensureFeatureSchedules } from '../../src/main/worker';
import { startFakeGithub, type FakeGithub } from '../harness/fake-github';
import { deliver } from '../harness/github';
import { fakeGithubEnv, redeliverInto, syncedRepo, type SyncedRepo } from '../harness/github-sync';
import { denBin } from '../harness/den-bin';
import { createTestOrg } from '../harness/identity';
import { ownDatabase } from '../harness/own-database';
import { closedPort } from '../harness/ports';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
const BIN = denBin();
const MAX_PAGES = 2;
const MAX_REDELIVERIES = 2;
let fake: FakeGithub;
let database: Awaited<ReturnType<typeof ownDatabase>>;
let stack: TestStack;
/** The same service while Temporal is stopped: it answers 503 to every delivery. */
let down: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;

beforeAll(async () => {
  fake = await startFakeGithub();
  database = await ownDatabase();
  const env = {
    ...fakeGithubEnv(fake, SECRET),
    DATABASE_URL: database.url,
    GITHUB_RECONCILE_MAX_PAGES: String(MAX_PAGES),
    GITHUB_RECONCILE_MAX_REDELIVERIES: String(MAX_REDELIVERIES),
  };
  stack = await startTestStack({ worker: true, env });
  down = await startTestStack({ env: { ...env, TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`, TEMPORAL_START_TIMEOUT: '1s' } });
  org = await createTestOrg(stack.services.database.db);
  redeliverInto(fake, () => stack);
});
afterAll(async () => {
  await down?.stop();
  await stack?.stop();
  await database?.drop();
  await fake?.close();
});

const db = () => stack.services.database.db;
const newRepo = (options: Parameters<typeof syncedRepo>[5] = {}) =>
  syncedRepo(db(), fake, org.organizationId, () => stack, SECRET, options);
const FILES = { '.claude-plugin/marketplace.json': '{"name":"market","plugins":[]}', 'README.md': 'not a manifest' };

/** `den …` as an operator runs it, against this file's database, Temporal and task queue. */
function den(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    DATABASE_URL: database.url,
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

async function reconcile(
  ...flags: string[]
): Promise<{ code: number; summary: GithubReconcileSummary & Record<string, unknown>; stderr: string }> {
  const run = await den('github', 'reconcile', ...flags);
  return { ...run, summary: JSON.parse(run.stdout || 'null') as GithubReconcileSummary & Record<string, unknown> };
}

/** One reconcile through the gateway, as the Schedule starts it (quicker than a `den` process). */
const reconcileNow = () =>
  stack.ingress.execute({
    workflow: githubReconcileWorkflow,
    id: `${githubReconcileScheduleId(stack.config.temporal.taskQueue)}/test-${randomUUID()}`,
    args: [],
    tenancy: { tenant: 'operator', admission: 'bypass' },
    timeoutMs: 60_000,
  });

const targetRow = (targetId: string) =>
  db().selectFrom('github_connector_targets').selectAll().where('id', '=', targetId).executeTakeFirstOrThrow();
const eventsOf = (r: SyncedRepo) =>
  db().selectFrom('github_sync_events').selectAll().where('target_id', '=', r.targetId).orderBy('created_at').execute();
const syncedTo = (r: SyncedRepo, sha: string) =>
  waitFor(async () => (await targetRow(r.targetId)).synced_sha === sha, 20_000, { what: `${r.fullName} synced to ${sha}` });
const asksFor = (guid: string) => fake.redeliveryRequests.filter((id) => fake.deliveries.find((d) => d.id === id)?.guid === guid);

/** A push the stopped service refused (503 unavailable), logged by GitHub at `deliveredAt`. */
async function refusedPush(r: SyncedRepo, deliveredAt?: number) {
  const sha = fake.commit(r.fullName, r.installationId, 'master', { ...FILES, 'README.md': randomUUID() });
  const deliveryId = randomUUID();
  const { payloadOf } = pushPayloads(r);
  const raw = JSON.stringify(payloadOf(sha));
  const signature = signGithubPayload(SECRET, raw);
  const response = await deliver(down, { event: 'push', deliveryId, raw, signature, secret: SECRET });
  expect(response.status).toBe(503);
  fake.logDelivery({ event: 'push', guid: deliveryId, raw, signature }, { status: response.status, body: response.text }, { deliveredAt });
  return { sha, deliveryId };
}

function pushPayloads(r: SyncedRepo) {
  return {
    payloadOf: (sha: string) => ({
      ref: 'refs/heads/master',
      after: sha,
      before: '0'.repeat(39) + '1',
      installation: { id: r.installationId },
      repository: { id: r.repositoryId, full_name: r.fullName, name: r.fullName.split('/')[1], default_branch: 'master' },
    }),
  };
}

/** Deliveries the service took (202), as GitHub logs them: filler for the log's pages. */
function logDelivered(count: number): void {
  for (let i = 0; i < count; i++) fake.logDelivery({ event: 'push', guid: randomUUID(), raw: '{}', signature: 'sha256=00' }, 202);
}

it('a push refused while Temporal was stopped is asked for again exactly once, and synced once', async () => {
  const r = await newRepo();
  const first = await r.push(FILES);
  await syncedTo(r, first.sha);
  const lost = await r.pushLogged({ ...FILES, '.mcp.json': '{"mcpServers":{}}' }, down);
  expect(lost.response.status).toBe(503);

  const run = await reconcile();
  expect(run.code).toBe(0);
  // Its progress as `den` prints it: redelivered, nothing waiting, and the points it spent (a page, the GET of its 503's body, a POST).
  expect(run.summary).toMatchObject({
    deliveriesSeen: 1,
    redeliveriesAsked: 1,
    redeliveriesCapped: 0,
    listingComplete: true,
    redeliveriesWaiting: 0,
    pointsSpent: 7,
    stoppedBy: null,
    resumeAt: null,
    errors: [],
  });
  expect(fake.redeliveryRequests).toEqual([lost.logId]);
  await syncedTo(r, lost.sha);
  const ended = await waitFor(
    async () => {
      const events = (await eventsOf(r)).filter((e) => e.delivery_id === lost.deliveryId);
      return events.length > 0 && events.every((e) => e.status !== 'queued' && e.status !== 'running') && events;
    },
    20_000,
    { what: 'the redelivered push’s sync' },
  );
  expect(ended.map((e) => e.status)).toEqual(['completed']);
  expect(fake.deliveries.find((d) => d.redelivery)).toMatchObject({ guid: lost.deliveryId, status_code: 202 });

  // Delivered now: the next reconcile asks nothing more, and records the GUID as delivered.
  const again = await reconcile('--verbose');
  expect(again.summary.redeliveriesAsked).toBe(0);
  expect(fake.redeliveryRequests).toHaveLength(1);
  expect(again.summary.redeliveries).toEqual([
    expect.objectContaining({
      guid: lost.deliveryId,
      outcome: 'delivered',
      tries: 1,
      asks: [expect.objectContaining({ attemptId: lost.logId, counted: true, answer: 'accepted' })],
    }),
  ]);
});

it('a branch head moved with no delivery at all is resynced by the reconcile, once', async () => {
  const r = await newRepo();
  const first = await r.push(FILES);
  await syncedTo(r, first.sha);
  const moved = fake.commit(r.fullName, r.installationId, 'master', { ...FILES, '.mcp.json': '{"mcpServers":{}}' });

  const run = await reconcile();
  expect(run.summary.targetsResynced).toBe(1);
  expect(run.summary.errors).toEqual([]);
  await syncedTo(r, moved);
  const reconciled = (await eventsOf(r)).filter((e) => e.event === 'reconcile');
  expect(reconciled.map((e) => e.status)).toEqual(['completed']);
  expect(reconciled[0]!.delivery_id).toMatch(/^reconcile-gse_/);

  await reconcile();
  expect((await eventsOf(r)).filter((e) => e.event === 'reconcile')).toHaveLength(1);

  // Moved back to the first commit without a push (a force-push whose delivery was lost): resynced again.
  fake.setHead(r.fullName, 'master', first.sha);
  expect((await reconcile()).summary.targetsResynced).toBe(1);
  await syncedTo(r, first.sha);
  expect((await eventsOf(r)).filter((e) => e.event === 'reconcile').map((e) => e.status)).toEqual(['completed', 'completed']);
});

it('a delivery that always fails stops at its cap; our own 503 overloaded does not count; --verbose and the exit code show it', async () => {
  // The log is short so far: each run reads all of it, so each run sees these attempts.
  const failing = randomUUID();
  const shed = randomUUID();
  fake.logDelivery({ event: 'push', guid: failing, raw: '{}', signature: 'sha256=00' }, { status: 500, body: 'oops' });
  fake.alwaysFail(failing, { status: 502, body: null });
  const overloaded = { status: 503, body: '{"error":"overloaded"}' };
  fake.logDelivery({ event: 'push', guid: shed, raw: '{}', signature: 'sha256=00' }, overloaded);
  fake.alwaysFail(shed, overloaded);

  const capped: number[] = [];
  for (let i = 0; i < 4; i++) {
    const summary = await reconcileNow();
    capped.push(summary.redeliveriesCapped ?? 0);
    // Each redelivery is logged by GitHub before the next run reads the log.
    await waitFor(() => asksFor(failing).length >= Math.min(i + 1, MAX_REDELIVERIES) && asksFor(shed).length >= i + 1, 10_000);
  }
  expect(asksFor(failing)).toHaveLength(MAX_REDELIVERIES);
  expect(capped).toEqual([0, 0, 1, 0]);
  expect(asksFor(shed)).toHaveLength(4);

  const run = await reconcile('--verbose');
  expect(run.code).toBe(0);
  const records = run.summary.redeliveries as {
    guid: string;
    outcome: string;
    tries: number;
    uncountedTries: number;
    asks: { answer: string }[];
  }[];
  // Given up with its last answer: the 502 of its newest attempt (not the 500 first logged), and no error, since GitHub took each ask.
  expect(records.find((g) => g.guid === failing)).toMatchObject({
    outcome: 'capped',
    tries: MAX_REDELIVERIES,
    uncountedTries: 0,
    lastStatusCode: 502,
    lastError: null,
  });
  expect(records.find((g) => g.guid === failing)!.asks.map((a) => a.answer)).toEqual(Array(MAX_REDELIVERIES).fill('accepted'));
  expect(records.find((g) => g.guid === shed)).toMatchObject({ outcome: 'asked', tries: 0, uncountedTries: 5 });
});

it('a 5xx from the redeliver endpoint leaves the delivery ask_failed, not refused for good, and the next run asks again', async () => {
  const guid = randomUUID();
  const raw = JSON.stringify({ zen: 'ping', hook_id: 1 });
  const logId = fake.logDelivery({ event: 'ping', guid, raw, signature: signGithubPayload(SECRET, raw) }, { status: 502, body: null });
  const ask = `/app/hook/deliveries/${logId}/attempts`;
  fake.fail((c) => c.kind === 'redeliver' && c.path === ask, 502);
  const record = () => db().selectFrom('github_redeliveries').selectAll().where('guid', '=', guid).executeTakeFirstOrThrow();

  const first = await reconcileNow();
  expect(first.errors).toContainEqual(expect.stringMatching(`^POST ${ask}: 502 `));
  expect(await record()).toMatchObject({ outcome: 'ask_failed', tries: 1, last_error: expect.stringMatching(/: 502 /) });
  expect(asksFor(guid)).toEqual([]);

  const second = await reconcileNow();
  expect(asksFor(guid)).toEqual([logId]);
  expect(await record()).toMatchObject({ outcome: 'asked', tries: 2 });
  expect(second.redeliveriesWaiting).toBe(first.redeliveriesWaiting! - 1);
  // GitHub sends it again: the service takes it, and the log shows it before the next test reads it.
  await waitFor(() => fake.deliveries.some((d) => d.guid === guid && d.redelivery && d.status_code === 200), 10_000, {
    what: 'the redelivered ping answered',
  });
});

it('2 failed deliveries on page 3 of a 3-page listing, one at the window’s edge, are each redelivered exactly once', async () => {
  const r = await newRepo();
  await syncedTo(r, (await r.push(FILES)).sha);
  // The window before: everything logged so far is read.
  const before = await reconcileNow();
  expect(before.listingComplete).toBe(true);
  const lastRunAt = Date.now();
  // Sent just before that reconcile listed, logged by GitHub once its attempt ended (GitHub waits 10 s).
  const edge = await refusedPush(r, lastRunAt - 5_000);
  const later = await refusedPush(r);
  // Then 250 deliveries the service took: the two failed ones are on page 3 of 100 a page.
  logDelivered(250);

  const first = await reconcileNow();
  expect(first).toMatchObject({ listingComplete: false, redeliveriesAsked: 0, deliveriesSeen: MAX_PAGES * 100 });
  const second = await reconcileNow();
  expect(second.redeliveriesAsked).toBeGreaterThanOrEqual(2);
  expect(asksFor(edge.deliveryId)).toHaveLength(1);
  expect(asksFor(later.deliveryId)).toHaveLength(1);
  await syncedTo(r, later.sha);

  for (let i = 0; i < 3; i++) await reconcileNow();
  expect(asksFor(edge.deliveryId)).toHaveLength(1);
  expect(asksFor(later.deliveryId)).toHaveLength(1);
  const records = await db()
    .selectFrom('github_redeliveries')
    .selectAll()
    .where('guid', 'in', [edge.deliveryId, later.deliveryId])
    .execute();
  expect(records.map((row) => [row.outcome, row.tries]).sort()).toEqual([
    ['delivered', 1],
    ['delivered', 1],
  ]);
});

it('a deleted branch, an empty repository and lost access are known states: reported per target, exit 0, cleared when a sync reads the branch', async () => {
  const gone = await newRepo({ ref: 'feature' });
  fake.commit(gone.fullName, gone.installationId, 'master', FILES);
  await syncedTo(gone, (await gone.push(FILES)).sha);
  fake.deleteBranch(gone.fullName, 'feature');
  const empty = await newRepo({ ref: null });
  fake.createEmptyRepository(empty.fullName, empty.installationId);
  const lost = await newRepo();
  // The repository exists on GitHub, but under another installation.
  fake.commit(lost.fullName, lost.installationId + 1, 'master', FILES);

  const run = await reconcile();
  expect(run.code).toBe(0);
  expect(run.stderr).toBe('');
  expect(run.summary.errors).toEqual([]);
  expect(run.summary.targetStates).toEqual(
    expect.arrayContaining([
      { targetId: gone.targetId, repository: gone.fullName, state: 'ref_missing' },
      { targetId: empty.targetId, repository: empty.fullName, state: 'empty_repository' },
      { targetId: lost.targetId, repository: lost.fullName, state: 'not_accessible' },
    ]),
  );
  const shown = await stack.request('GET', `/v1/connectors/github/targets/${gone.targetId}`, { headers: org.owner.headers });
  expect(shown.json).toMatchObject({ status: 'active', statusReason: 'ref_missing' });

  // The branch comes back with a push: the sync reads it, and the state clears.
  const back = await gone.push({ ...FILES, '.mcp.json': '{"mcpServers":{}}' }, { branch: 'feature', parent: null });
  await syncedTo(gone, back.sha);
  expect(await targetRow(gone.targetId)).toMatchObject({ status: 'active', status_reason: null });
  // The empty repository gets its first commit: the next reconcile syncs it and clears its state.
  const firstCommit = fake.commit(empty.fullName, empty.installationId, 'main', FILES);
  const next = await reconcile();
  expect(next.summary.targetStates?.map((s) => s.targetId)).not.toContain(empty.targetId);
  await syncedTo(empty, firstCommit);
  expect(await targetRow(empty.targetId)).toMatchObject({ status_reason: null, default_branch: 'main' });
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
    expect(Object.keys(summary).sort()).toEqual([
      'deliveriesSeen',
      'errors',
      'listingComplete',
      'pointsSpent',
      'redeliveriesAsked',
      'redeliveriesCapped',
      'redeliveriesWaiting',
      'resumeAt',
      'stoppedBy',
      'targetStates',
      'targetsChecked',
      'targetsResynced',
    ]);
  } finally {
    await handle.delete();
  }
});
