/**
 * Suspended and deleted installations end to end: the `installation` webhook over real HTTP, the
 * real worker, Postgres (a database of its own: the reconcile walks every active target), and a
 * fake GitHub that refuses a suspended installation a token (403) and a deleted one (404).
 */
import { randomUUID } from 'node:crypto';
import { githubReconcileScheduleId, githubReconcileWorkflow } from '../../src/github/contract';
import { installationOwner } from '../../src/github/installations';
import { getTarget, recordResync } from '../../src/github/target-records';
import { signalTarget } from '../../src/github/target-signal';
import { startFakeGithub, type FakeGithub } from '../harness/fake-github';
import { deliver, deliveryResult, githubExample } from '../harness/github';
import { fakeGithubEnv, syncedRepo, type SyncedRepo } from '../harness/github-sync';
import { createTestOrg } from '../harness/identity';
import { ownDatabase } from '../harness/own-database';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
let fake: FakeGithub;
let database: Awaited<ReturnType<typeof ownDatabase>>;
let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;

beforeAll(async () => {
  fake = await startFakeGithub();
  database = await ownDatabase();
  stack = await startTestStack({ worker: true, env: { ...fakeGithubEnv(fake, SECRET), DATABASE_URL: database.url } });
  org = await createTestOrg(stack.services.database.db);
});
afterAll(async () => {
  await stack?.stop();
  await database?.drop();
  await fake?.close();
});

const db = () => stack.services.database.db;
const FILES = { '.claude-plugin/plugin.json': '{"name":"demo"}', 'skills/a/SKILL.md': '# A' };
const newRepo = (installationId?: number) =>
  syncedRepo(db(), fake, org.organizationId, () => stack, SECRET, installationId === undefined ? {} : { installationId });
const targetRow = (targetId: string) =>
  db().selectFrom('github_connector_targets').selectAll().where('id', '=', targetId).executeTakeFirstOrThrow();
const syncedTo = (r: SyncedRepo, sha: string, ms = 20_000) =>
  waitFor(async () => (await targetRow(r.targetId)).synced_sha === sha, ms, { what: `${r.fullName} synced to ${sha}` });
/** Every call GitHub saw for the installation: its token requests, and the calls its tokens made. */
const callsOf = (installationId: number) =>
  fake.calls.filter((c) => c.installationId === installationId || c.path === `/app/installations/${installationId}/access_tokens`);

/** The installation webhook GitHub sends for `action`, signed, over real HTTP; waits for its workflow. */
async function installationEvent(installationId: number, action: 'suspend' | 'unsuspend' | 'deleted') {
  const payload = githubExample('installation', (p) => p.action === action);
  payload.installation.id = installationId;
  const deliveryId = randomUUID();
  const response = await deliver(stack, { event: 'installation', deliveryId, payload, secret: SECRET });
  expect(response.status).toBe(202);
  return deliveryResult(stack, deliveryId);
}

const reconcileNow = () =>
  stack.ingress.execute({
    workflow: githubReconcileWorkflow,
    id: `${githubReconcileScheduleId(stack.config.temporal.taskQueue)}/test-${randomUUID()}`,
    args: [],
    tenancy: { tenant: 'operator', admission: 'bypass' },
    timeoutMs: 60_000,
  });

it('suspend disables the targets and nothing calls GitHub for them; unsuspend resyncs each target at once', async () => {
  const r = await newRepo();
  await syncedTo(r, (await r.push(FILES)).sha);
  // A sync event recorded before the suspension, handed to the target's workflow after it.
  const early = await recordResync(db(), { target: (await getTarget(db(), r.targetId))!, reason: 'manual' });

  fake.suspendInstallation(r.installationId);
  const suspended = await installationEvent(r.installationId, 'suspend');
  expect(suspended.targetChanges).toEqual([{ targetId: r.targetId, field: 'status', from: 'active', to: 'disabled' }]);
  expect(await targetRow(r.targetId)).toMatchObject({ status: 'disabled', status_reason: 'installation_suspended' });
  const before = callsOf(r.installationId).length;
  const target = (await getTarget(db(), r.targetId))!;
  await signalTarget(stack.ingress, { target, signal: { eventId: early, full: true }, idleMs: 60_000, admission: 'bypass' });
  const refused = await waitFor(
    async () => {
      const row = await db().selectFrom('github_sync_events').selectAll().where('id', '=', early).executeTakeFirstOrThrow();
      return row.status === 'failed' && row;
    },
    20_000,
    { what: 'the early sync event to end' },
  );
  expect(refused.error_code).toBe('target_inactive');
  const reconciled = await reconcileNow();
  expect(reconciled.errors).toEqual([]);
  // Neither the sync nor the reconcile asked GitHub anything for the suspended installation.
  expect(callsOf(r.installationId).length).toBe(before);

  // While suspended the branch moved (GitHub sends no webhooks to a suspended installation).
  const moved = fake.commit(r.fullName, r.installationId, 'master', { ...FILES, 'skills/b/SKILL.md': '# B' });
  fake.unsuspendInstallation(r.installationId);
  const startedAt = Date.now();
  const unsuspended = await installationEvent(r.installationId, 'unsuspend');
  expect(unsuspended.syncEvents).toEqual([expect.objectContaining({ targetId: r.targetId, status: 'queued', created: true })]);
  await syncedTo(r, moved, 10_000);
  expect(Date.now() - startedAt).toBeLessThan(10_000);
  expect(await targetRow(r.targetId)).toMatchObject({ status: 'active', status_reason: null, last_sync_status: 'completed' });
});

it('a token GitHub refuses because the installation was suspended meanwhile disables all its targets at once, each sync failing no more than once', async () => {
  const r = await newRepo();
  const sibling = await newRepo(r.installationId);
  await syncedTo(r, (await r.push(FILES)).sha);
  await syncedTo(sibling, (await sibling.push(FILES)).sha);

  // Suspended on GitHub, and its webhook lost: the next push's sync is refused a token.
  fake.suspendInstallation(r.installationId);
  const push = await r.push({ ...FILES, 'skills/a/SKILL.md': '# A, changed' });
  const event = await waitFor(
    async () => {
      const row = await db().selectFrom('github_sync_events').selectAll().where('delivery_id', '=', push.deliveryId).executeTakeFirst();
      return row?.status === 'failed' && row;
    },
    20_000,
    { what: 'the refused sync' },
  );
  expect(event).toMatchObject({ error_code: 'installation_suspended' });
  for (const target of [r, sibling]) {
    expect(await targetRow(target.targetId)).toMatchObject({ status: 'disabled', status_reason: 'installation_suspended' });
  }
  // The sibling never asked GitHub for itself: no call reached its repository after the suspension.
  const tokenRequests = callsOf(r.installationId).filter((c) => c.kind === 'token' && c.status === 403);
  expect(tokenRequests).toHaveLength(1);

  // The unsuspend webhook brings both back, each resynced.
  fake.unsuspendInstallation(r.installationId);
  await installationEvent(r.installationId, 'unsuspend');
  await syncedTo(r, push.sha);
  expect(await targetRow(sibling.targetId)).toMatchObject({ status: 'active', status_reason: null });
});

it('a token GitHub refuses because the installation is gone disconnects its targets and removes its binding', async () => {
  const r = await newRepo();
  await syncedTo(r, (await r.push(FILES)).sha);
  fake.deleteInstallation(r.installationId);
  const push = await r.push({ ...FILES, 'skills/a/SKILL.md': '# A, again' });
  await waitFor(async () => (await targetRow(r.targetId)).status === 'disconnected', 20_000, { what: 'the target disconnected' });
  expect(await targetRow(r.targetId)).toMatchObject({
    status_reason: 'installation_deleted',
    synced_sha: expect.not.stringMatching(push.sha),
  });
  expect(await installationOwner(db(), r.installationId)).toBeUndefined();
  // The sync's own record of the push is written after the target's state, by the same sync.
  const syncEvent = () =>
    db().selectFrom('github_sync_events').selectAll().where('delivery_id', '=', push.deliveryId).executeTakeFirstOrThrow();
  await waitFor(async () => (await syncEvent()).status !== 'running', 20_000, { what: "the push's sync event to end" });
  expect(await syncEvent()).toMatchObject({ status: 'failed', error_code: 'installation_deleted' });
});

it('a reconcile whose token GitHub refuses because the installation was suspended meanwhile disables its targets, with no webhook at all', async () => {
  const r = await newRepo();
  await syncedTo(r, (await r.push(FILES)).sha);
  // Suspended on GitHub, its webhook lost, and no push since: only the reconcile calls GitHub for it.
  fake.suspendInstallation(r.installationId);
  const reconciled = await reconcileNow();
  expect(reconciled.errors).toEqual([]);
  expect(reconciled.targetStates).toContainEqual({ targetId: r.targetId, repository: r.fullName, state: 'installation_suspended' });
  const shown = await stack.request('GET', `/v1/connectors/github/targets/${r.targetId}`, { headers: org.owner.headers });
  expect(shown.json).toMatchObject({ status: 'disabled', statusReason: 'installation_suspended' });
  expect(callsOf(r.installationId).filter((c) => c.kind === 'token' && c.status === 403)).toHaveLength(1);
});
