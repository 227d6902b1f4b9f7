/**
 * Repositories as large and as odd as GitHub serves them, over the real stack: a tree of 150,000
 * entries (GitHub truncates a recursive listing past 100,000 entries or 7 MB), binary files and
 * NUL bytes, a manifest with a byte-order mark, and an answer our code cannot read. Each ends in
 * a final, recorded status within the sync's request bound: never a retry loop.
 */
import { randomUUID } from 'node:crypto';
import { startFakeGithub, type FakeGithub } from '../harness/fake-github';
import { fakeGithubEnv, syncedRepo, type SyncedRepo } from '../harness/github-sync';
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
const TREE_BOUND = 30;
/** Only where plugins live: the walk never needs to read vendor/. */
const NARROW_PATHS = '.claude-plugin/marketplace.json,plugins/*/.claude-plugin/plugin.json,plugins/*/skills/*/SKILL.md';
let fake: FakeGithub;
// The default sync paths (a skill manifest may lie in any directory), and a bound of 30 tree reads.
let stack: TestStack;
/** Narrow sync paths, the default bound. */
let narrow: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;

beforeAll(async () => {
  fake = await startFakeGithub({ latencyMs: 2 });
  stack = await startTestStack({
    worker: true,
    env: { ...fakeGithubEnv(fake, SECRET), GITHUB_SYNC_MAX_TREE_REQUESTS: String(TREE_BOUND) },
  });
  narrow = await startTestStack({ worker: true, env: { ...fakeGithubEnv(fake, SECRET), GITHUB_SYNC_PATHS: NARROW_PATHS } });
  org = await createTestOrg(stack.services.database.db);
});
afterAll(async () => {
  await narrow.stop();
  await stack.stop();
  await fake.close();
});

const db = () => stack.services.database.db;
const MANIFESTS = {
  '.claude-plugin/marketplace.json': '{"name":"market","plugins":[{"name":"alpha"}]}',
  'plugins/alpha/.claude-plugin/plugin.json': '{"name":"alpha","version":"1.0.0"}',
  'plugins/alpha/skills/greet/SKILL.md': '# Greet\nSay hello.',
};

/** 150 packages of 1,000 files each below vendor/, beside the three manifests: 150,000 files and 300 directories. */
function hugeTree(): Record<string, string> {
  const files: Record<string, string> = { ...MANIFESTS };
  for (let p = 0; p < 150; p++) {
    for (let m = 0; m < 1000; m++)
      files[`vendor/pkg-${String(p).padStart(3, '0')}/lib/m-${String(m).padStart(3, '0')}.js`] = 'module.exports = 0;\n';
  }
  return files;
}

async function ended(r: SyncedRepo, deliveryId: string, ms = 60_000) {
  return waitFor(
    async () => {
      const row = await db()
        .selectFrom('github_sync_events')
        .selectAll()
        .where('target_id', '=', r.targetId)
        .where('delivery_id', '=', deliveryId)
        .executeTakeFirst();
      return row && !['queued', 'running'].includes(row.status) && row;
    },
    ms,
    { what: `the sync of ${deliveryId}` },
  );
}

const filesOf = (targetId: string) =>
  db().selectFrom('github_target_files').selectAll().where('target_id', '=', targetId).orderBy('path').execute();
const targetRow = (targetId: string) =>
  db().selectFrom('github_connector_targets').selectAll().where('id', '=', targetId).executeTakeFirstOrThrow();
const callsFor = (r: SyncedRepo, kind?: string) =>
  fake.calls.filter((c) => c.repository === r.fullName.toLowerCase() && (!kind || c.kind === kind));

it('150,000 entries with the default paths: partial `tree_too_large` with the 3 manifests, within the bound of tree reads, tried once', async () => {
  const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
  const pushed = await r.push(hugeTree());
  expect(pushed.response.status).toBe(202);
  const event = await ended(r, pushed.deliveryId);
  expect(event).toMatchObject({ status: 'partial', attempts: 1, error_code: 'tree_too_large', synced_sha: pushed.sha });
  expect(event.error_message).toMatch(/^read 30 trees, the bound; not read: vendor\/pkg-/);
  expect((await filesOf(r.targetId)).map((f) => [f.path, f.status])).toEqual(
    Object.keys(MANIFESTS)
      .sort()
      .map((path) => [path, 'ok']),
  );
  // The first recursive read was truncated, as GitHub truncates it, and the walk stopped at its bound.
  const trees = callsFor(r, 'tree');
  expect(trees).toHaveLength(TREE_BOUND);
  expect(callsFor(r, 'blob')).toHaveLength(3);
  expect(callsFor(r).every((c) => c.status === 200)).toBe(true);
  expect(await targetRow(r.targetId)).toMatchObject({
    last_sync_status: 'partial',
    last_sync_error_code: 'tree_too_large',
    status_reason: null,
  });

  // A second push reads again within the bound: no retry loop, and nothing fetched again.
  const again = await r.push({ ...hugeTree(), 'README.md': 'changed' });
  expect(await ended(r, again.deliveryId)).toMatchObject({ status: 'partial', attempts: 1 });
  expect(callsFor(r, 'tree')).toHaveLength(2 * TREE_BOUND);
  expect(callsFor(r, 'blob')).toHaveLength(3);
}, 120_000);

it('150,000 entries with paths that only plugins/ can hold: completed, vendor/ never read', async () => {
  const r = await syncedRepo(db(), fake, org.organizationId, () => narrow, SECRET);
  const pushed = await r.push(hugeTree());
  expect(await ended(r, pushed.deliveryId)).toMatchObject({ status: 'completed', attempts: 1, error_code: null });
  expect((await filesOf(r.targetId)).map((f) => f.path)).toEqual(Object.keys(MANIFESTS).sort());
  const trees = callsFor(r, 'tree');
  // The truncated recursive read, the top level, then .claude-plugin/ and plugins/ whole.
  expect(trees.length).toBeLessThanOrEqual(4);
  const read = trees.map((c) => c.path);
  expect(read.some((p) => p.includes('vendor'))).toBe(false);
}, 120_000);

it('nested directories deeper than the bound: partial, and the snapshot keeps what lies in the directories left unread', async () => {
  const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
  const deep: Record<string, string> = { 'skills/top/SKILL.md': '# Top' };
  for (let i = 0; i < 40; i++) deep[`${'d/'.repeat(i + 1)}SKILL.md`] = `# Level ${i}`;
  const whole = await r.push(deep);
  expect(await ended(r, whole.deliveryId)).toMatchObject({ status: 'completed' });
  expect(await filesOf(r.targetId)).toHaveLength(41);
  // Now each recursive read is cut after 5 entries: every directory costs two reads, and the bound comes first.
  fake.truncate(r.fullName, 5);
  const before = callsFor(r, 'tree').length;
  const second = await r.push({ ...deep, 'skills/top/SKILL.md': '# Top, changed' });
  const event = await ended(r, second.deliveryId);
  expect(event).toMatchObject({ status: 'partial', attempts: 1, error_code: 'tree_too_large' });
  expect(event.error_message).toMatch(/not read: d\/d\//);
  expect(callsFor(r, 'tree').length - before).toBe(TREE_BOUND);
  // What sits below the unread directories is neither fetched nor removed; the top file changed.
  expect(await filesOf(r.targetId)).toHaveLength(41);
  expect((await targetRow(r.targetId)).last_sync_counts).toEqual({ added: 0, changed: 1, removed: 0, skipped: 0, invalid: 0 });
  expect((await filesOf(r.targetId)).find((f) => f.path === 'skills/top/SKILL.md')?.content).toBe('# Top, changed');
});

it('a binary file and one with a NUL byte are skipped with their reason; a manifest with a byte-order mark parses', async () => {
  const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
  const pushed = await r.push({
    '.claude-plugin/marketplace.json': '\uFEFF{"name":"market","plugins":[]}',
    'skills/logo/SKILL.md': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0xff, 0xfe]),
    'skills/nul/SKILL.md': '# Has a \u0000 byte',
    'skills/ok/SKILL.md': '# Fine',
  });
  expect(await ended(r, pushed.deliveryId)).toMatchObject({ status: 'completed', attempts: 1, error_code: null });
  expect((await filesOf(r.targetId)).map((f) => [f.path, f.status, f.error, f.content])).toEqual([
    ['.claude-plugin/marketplace.json', 'ok', null, '\uFEFF{"name":"market","plugins":[]}'],
    ['skills/logo/SKILL.md', 'skipped', 'binary', null],
    ['skills/nul/SKILL.md', 'skipped', 'nul_byte', null],
    ['skills/ok/SKILL.md', 'ok', null, '# Fine'],
  ]);
  expect((await targetRow(r.targetId)).last_sync_counts).toEqual({ added: 2, changed: 0, removed: 0, skipped: 2, invalid: 0 });
});

it('an answer our code cannot read ends the sync failed `sync_error` at once, recorded, and the next push syncs', async () => {
  const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
  // A 200 without the tree GitHub promises, every time it is asked.
  fake.fail((c) => c.repository === r.fullName.toLowerCase() && c.kind === 'tree', 200, 50, {}, 'not a tree');
  const broken = await r.push({ 'skills/a/SKILL.md': '# A' });
  const event = await ended(r, broken.deliveryId);
  expect(event).toMatchObject({ status: 'failed', attempts: 1, error_code: 'sync_error' });
  expect(callsFor(r, 'tree')).toHaveLength(1);
  expect(await targetRow(r.targetId)).toMatchObject({ last_sync_status: 'failed', last_sync_error_code: 'sync_error' });
  // The workflow is alive: once GitHub answers properly again, the next push syncs.
  fake.clearFailures();
  const healed = await r.push({ 'skills/a/SKILL.md': '# A, again' });
  expect(await ended(r, healed.deliveryId)).toMatchObject({ status: 'completed', attempts: 1 });
});
