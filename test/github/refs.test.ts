/**
 * Refs and ordering as GitHub really behaves, over the real stack against the fake GitHub: a
 * target without a ref follows the repository's default branch (through a rename) and takes no
 * push to another branch or a tag; a head read that lags behind a push never marks that push
 * superseded; pushes that arrive out of order, and a force-push, end with the branch's real head.
 */
import { randomUUID } from 'node:crypto';
import { githubDeliveryWorkflow, githubDeliveryWorkflowId } from '../../src/github/contract';
import { deliveryResult } from '../harness/github';
import { startFakeGithub, type FakeGithub } from '../harness/fake-github';
import { fakeGithubEnv, syncedRepo, type SyncedRepo } from '../harness/github-sync';
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
let fake: FakeGithub;
let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;

beforeAll(async () => {
  fake = await startFakeGithub();
  stack = await startTestStack({ worker: true, env: fakeGithubEnv(fake, SECRET) });
  org = await createTestOrg(stack.services.database.db);
});
afterAll(async () => {
  await stack.stop();
  await fake.close();
});

const db = () => stack.services.database.db;
const FILES = { '.claude-plugin/marketplace.json': '{"name":"market","plugins":[]}' };
const notAccepted = { ok: true, accepted: false, reason: 'no matching target' };

const eventsOf = (r: SyncedRepo) =>
  db().selectFrom('github_sync_events').selectAll().where('target_id', '=', r.targetId).orderBy('created_at').execute();
const targetRow = (r: SyncedRepo) =>
  db().selectFrom('github_connector_targets').selectAll().where('id', '=', r.targetId).executeTakeFirstOrThrow();
const ended = (r: SyncedRepo, deliveryId: string) =>
  waitFor(
    async () => {
      const event = (await eventsOf(r)).find((e) => e.delivery_id === deliveryId);
      return event && !['queued', 'running'].includes(event.status) && event;
    },
    20_000,
    { what: `the sync of ${deliveryId}` },
  );
const settled = (r: SyncedRepo, count: number) =>
  waitFor(
    async () => {
      const events = await eventsOf(r);
      return events.length === count && events.every((e) => !['queued', 'running'].includes(e.status)) && events;
    },
    20_000,
    { what: `${count} settled events of ${r.fullName}` },
  );

describe('a target without a ref', () => {
  it('follows the default branch: a push to another branch or a tag is not accepted for it and changes nothing', async () => {
    const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET, { ref: null });
    const main = await r.push(FILES);
    expect(await ended(r, main.deliveryId)).toMatchObject({ status: 'completed', synced_sha: main.sha });
    expect(await targetRow(r)).toMatchObject({ default_branch: 'master', synced_sha: main.sha });

    const bot = await r.push({ ...FILES, '.mcp.json': '{"dependabot":true}' }, { branch: 'dependabot/npm_and_yarn/left-pad-1.3.0' });
    expect([bot.response.status, bot.response.json]).toEqual([200, notAccepted]);
    const tag = await r.deliverPush(main.sha, { ref: 'refs/tags/v1.0.0' });
    expect([tag.response.status, tag.response.json]).toEqual([200, notAccepted]);
    expect((await eventsOf(r)).map((e) => e.delivery_id)).toEqual([main.deliveryId]);
    expect(await targetRow(r)).toMatchObject({ synced_sha: main.sha, pending_sha: null });
  });

  it('a push the front door could not vouch for (accepted durably) still queues no work for it: one skipped `no_target` row', async () => {
    const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET, { ref: null });
    await ended(r, (await r.push(FILES)).deliveryId);
    const deliveryId = randomUUID();
    const input = {
      deliveryId,
      receivedAt: Date.now(),
      event: 'push' as const,
      action: null,
      installationId: r.installationId,
      repository: { id: r.repositoryId, fullName: r.fullName },
      ref: 'refs/heads/dependabot/npm_and_yarn/left-pad-1.3.0',
      headSha: 'f'.repeat(40),
      defaultBranch: 'master',
    };
    await stack.ingress.start({
      workflow: githubDeliveryWorkflow,
      id: githubDeliveryWorkflowId(deliveryId),
      args: [input],
      tenancy: { tenant: org.organizationId, admission: 'bypass' },
    });
    const summary = await deliveryResult(stack, deliveryId);
    expect(summary.syncEvents).toEqual([expect.objectContaining({ targetId: null, status: 'skipped', outcome: 'no_target' })]);
    expect(await targetRow(r)).toMatchObject({ pending_sha: null });
  });

  it('follows a rename of the default branch, from the next push or from the repository API', async () => {
    const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET, { ref: null });
    await ended(r, (await r.push(FILES)).deliveryId);
    fake.renameBranch(r.fullName, 'master', 'main');
    const renamed = await r.push({ ...FILES, '.mcp.json': '{}' }, { branch: 'main' });
    expect(renamed.response.status).toBe(202);
    expect(await ended(r, renamed.deliveryId)).toMatchObject({ status: 'completed', synced_sha: renamed.sha });
    expect(await targetRow(r)).toMatchObject({ default_branch: 'main' });

    // Renamed again with no push: a forced sync finds the branch it knew gone, asks the repository, and follows.
    fake.renameBranch(r.fullName, 'main', 'trunk');
    const moved = fake.commit(r.fullName, r.installationId, 'trunk', { ...FILES, '.mcp.json': '{"v":2}' });
    const forced = await stack.request('POST', `/v1/connectors/github/targets/${r.targetId}/sync`, { headers: org.owner.headers });
    expect(forced.status).toBe(202);
    await waitFor(async () => (await targetRow(r)).synced_sha === moved, 20_000, { what: 'the sync of trunk' });
    expect(await targetRow(r)).toMatchObject({ default_branch: 'trunk', status_reason: null, last_sync_status: 'completed' });
  });
});

describe('ordering', () => {
  it('a head read that lags behind the push does not mark the push superseded', async () => {
    const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
    const a = await r.push(FILES);
    expect(await ended(r, a.deliveryId)).toMatchObject({ status: 'completed' });
    const b = fake.commit(r.fullName, r.installationId, 'master', { ...FILES, '.mcp.json': '{"b":1}' });
    // The first ref read still answers the old head, as a replica behind the push would.
    fake.lagRefReads(r.fullName, 'master', [a.sha]);
    const pushed = await r.deliverPush(b);
    expect(await ended(r, pushed.deliveryId)).toMatchObject({ status: 'completed', synced_sha: b });
    expect(await targetRow(r)).toMatchObject({ synced_sha: b });
  });

  it('two pushes waiting together behind reads that lag: the one read completes, the newer is reopened and completes next', async () => {
    const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
    const a = await r.push(FILES);
    await ended(r, a.deliveryId);
    // The next sync waits 2 s on a secondary limit: the second push joins its batch meanwhile.
    fake.secondaryRateLimit(r.installationId, { retryAfterSeconds: 2 });
    const b = await r.push({ ...FILES, '.mcp.json': '{"b":1}' });
    await waitFor(async () => (await eventsOf(r)).some((e) => e.delivery_id === b.deliveryId && e.error_code === 'rate_limited'), 10_000);
    const c = await r.push({ ...FILES, '.mcp.json': '{"c":1}' });
    // Its first read answers A, its second B, both behind C: B is synced, C (not known to be older) is queued again.
    fake.lagRefReads(r.fullName, 'master', [a.sha, b.sha]);
    const events = await settled(r, 3);
    expect(events.map((e) => [e.delivery_id, e.status, e.synced_sha])).toEqual([
      [a.deliveryId, 'completed', a.sha],
      [b.deliveryId, 'completed', b.sha],
      [c.deliveryId, 'completed', c.sha],
    ]);
    expect(await targetRow(r)).toMatchObject({ synced_sha: c.sha, pending_sha: null });
  });

  it('pushes that arrive out of order: the newer head completes, the older push is superseded by ancestry', async () => {
    const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
    const b = fake.commit(r.fullName, r.installationId, 'master', FILES);
    const c = fake.commit(r.fullName, r.installationId, 'master', { ...FILES, '.mcp.json': '{"c":1}' });
    const newer = await r.deliverPush(c);
    expect(await ended(r, newer.deliveryId)).toMatchObject({ status: 'completed', synced_sha: c });
    const older = await r.deliverPush(b);
    expect(await ended(r, older.deliveryId)).toMatchObject({ status: 'superseded', synced_sha: c });
    expect(await targetRow(r)).toMatchObject({ synced_sha: c });
    // Decided by ancestry: GitHub was asked how the late head relates to the synced one.
    const compares = fake.calls.filter((call) => call.repository === r.fullName.toLowerCase() && call.kind === 'compare');
    expect(compares.map((call) => call.path.split('/').pop())).toEqual([`${b}...${c}`]);
  });

  it('a force-push: a late push of the history it replaced is superseded once the ref is read again', async () => {
    const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
    const old = await r.push(FILES);
    await ended(r, old.deliveryId);
    const replaced = fake.commit(r.fullName, r.installationId, 'master', { ...FILES, '.mcp.json': '{"old":1}' });
    const forced = await r.push({ ...FILES, '.mcp.json': '{"forced":1}' }, { parent: null });
    expect(await ended(r, forced.deliveryId)).toMatchObject({ status: 'completed', synced_sha: forced.sha });
    const late = await r.deliverPush(replaced);
    expect(await ended(r, late.deliveryId)).toMatchObject({ status: 'superseded', synced_sha: forced.sha });
    const refReads = fake.calls.filter((call) => call.repository === r.fullName.toLowerCase() && call.kind === 'ref');
    // The late push's sync compared its head (diverged) and read the ref again.
    expect(refReads.length).toBeGreaterThanOrEqual(4);
  });
});
