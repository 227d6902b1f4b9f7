/**
 * The target sync end to end: signed pushes over real HTTP, the real worker and Postgres, and a
 * fake GitHub API on loopback that verifies the App JWT and the installation token on each call.
 */
import { randomUUID } from 'node:crypto';
import { startFakeGithub, gitBlobSha, type FakeGithub } from '../harness/fake-github';
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
const newRepo = () => syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);

const PLUGIN = '{"name":"demo","version":"1.0.0"}';
const FILES = {
  '.claude-plugin/marketplace.json': '{"name":"market","plugins":[]}',
  'plugins/demo/.claude-plugin/plugin.json': PLUGIN,
  'plugins/demo/skills/hello/SKILL.md': '# Hello\nSay hello.',
  '.mcp.json': '{"mcpServers":{}}',
  'README.md': 'not a manifest',
  'src/index.ts': 'export {};',
};

async function eventsOf(r: SyncedRepo) {
  const res = await stack.request('GET', `/v1/connectors/github/sync-events?repo=${r.fullName}&limit=200`, { headers: org.owner.headers });
  expect(res.status).toBe(200);
  return res.json.events as {
    deliveryId: string;
    headSha: string;
    status: string;
    attempts: number;
    error: { code: string; message: string } | null;
    syncedSha: string | null;
  }[];
}

async function eventOf(r: SyncedRepo, deliveryId: string, done = ['completed', 'partial', 'failed', 'superseded']) {
  return waitFor(
    async () => {
      const event = (await eventsOf(r)).find((e) => e.deliveryId === deliveryId);
      return event && done.includes(event.status) && event;
    },
    20_000,
    { what: `sync event of ${deliveryId}` },
  );
}

const filesOf = (targetId: string) =>
  db().selectFrom('github_target_files').selectAll().where('target_id', '=', targetId).orderBy('path').execute();
const targetRow = (targetId: string) =>
  db().selectFrom('github_connector_targets').selectAll().where('id', '=', targetId).executeTakeFirstOrThrow();
const countTargets = async () =>
  (await db().selectFrom('github_connector_targets').select('id').where('organization_id', '=', org.organizationId).execute()).length;
const callsFor = (r: SyncedRepo, kind: string) => fake.calls.filter((c) => c.repository === r.fullName.toLowerCase() && c.kind === kind);

it('a signed push becomes a snapshot of the manifests at the branch head, and a second push fetches only the changed blob', async () => {
  const r = await newRepo();
  const first = await r.push(FILES);
  expect(first.response.status).toBe(202);
  const event = await eventOf(r, first.deliveryId);
  expect(event).toMatchObject({ status: 'completed', attempts: 1, error: null, syncedSha: first.sha });

  const files = await filesOf(r.targetId);
  expect(files.map((f) => f.path)).toEqual([
    '.claude-plugin/marketplace.json',
    '.mcp.json',
    'plugins/demo/.claude-plugin/plugin.json',
    'plugins/demo/skills/hello/SKILL.md',
  ]);
  const plugin = files.find((f) => f.path.endsWith('plugin.json'))!;
  expect(plugin).toMatchObject({ blob_sha: gitBlobSha(PLUGIN), content: PLUGIN, status: 'ok', size: String(PLUGIN.length) });
  const target = await targetRow(r.targetId);
  expect(target).toMatchObject({ synced_sha: first.sha, last_sync_status: 'completed', pending_sha: null });
  expect(target.last_sync_counts).toEqual({ added: 4, changed: 0, removed: 0, skipped: 0, invalid: 0 });
  expect(callsFor(r, 'blob')).toHaveLength(4);
  // Every call carried a credential the fake verified: the token on repository routes, the JWT for the token.
  expect(fake.calls.filter((c) => c.repository === r.fullName.toLowerCase()).every((c) => c.auth === 'token' && c.status === 200)).toBe(
    true,
  );

  const second = await r.push({ ...FILES, 'plugins/demo/.claude-plugin/plugin.json': '{"name":"demo","version":"1.1.0"}' });
  expect(await eventOf(r, second.deliveryId)).toMatchObject({ status: 'completed', syncedSha: second.sha });
  expect(callsFor(r, 'blob')).toHaveLength(5);
  expect((await targetRow(r.targetId)).last_sync_counts).toEqual({ added: 0, changed: 1, removed: 0, skipped: 0, invalid: 0 });
});

it('completes a truncated tree listing by walking its subtrees', async () => {
  const r = await newRepo();
  fake.commit(r.fullName, r.installationId, 'master', {});
  fake.truncate(r.fullName);
  const pushed = await r.push(FILES);
  expect(await eventOf(r, pushed.deliveryId)).toMatchObject({ status: 'completed', syncedSha: pushed.sha });
  expect((await filesOf(r.targetId)).map((f) => f.path)).toHaveLength(4);
  // The recursive read, then one read per directory.
  expect(callsFor(r, 'tree').length).toBeGreaterThan(2);
});

it('retries 500s with backoff: two 500s then 200 complete with 3 attempts', async () => {
  const r = await newRepo();
  fake.fail((c) => c.repository === r.fullName.toLowerCase() && c.kind === 'tree', 500, 2);
  const pushed = await r.push(FILES);
  expect(await eventOf(r, pushed.deliveryId)).toMatchObject({ status: 'completed', attempts: 3, error: null, syncedSha: pushed.sha });
  expect(callsFor(r, 'tree').map((c) => c.status)).toEqual([500, 500, 200]);
});

it('a 404 is final: failed after 1 attempt with its code', async () => {
  const r = await newRepo();
  fake.fail((c) => c.repository === r.fullName.toLowerCase() && c.kind === 'tree', 404, 1);
  const pushed = await r.push(FILES);
  const event = await eventOf(r, pushed.deliveryId);
  expect(event).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'github_404' } });
  expect(callsFor(r, 'tree')).toHaveLength(1);
  expect(await targetRow(r.targetId)).toMatchObject({ last_sync_status: 'failed', last_sync_error_code: 'github_404', synced_sha: null });
});

it('an invalid plugin.json is kept as invalid and the sync ends partial', async () => {
  const r = await newRepo();
  const pushed = await r.push({ ...FILES, 'plugins/demo/.claude-plugin/plugin.json': '{"name": ' });
  expect(await eventOf(r, pushed.deliveryId)).toMatchObject({ status: 'partial', attempts: 1 });
  const plugin = (await filesOf(r.targetId)).find((f) => f.path.endsWith('plugin.json'))!;
  expect(plugin.status).toBe('invalid');
  expect(plugin.error).toMatch(/invalid JSON/);
  expect((await targetRow(r.targetId)).last_sync_counts).toMatchObject({ invalid: 1 });
});

it('a burst of pushes to one target, alternately to two API replicas with a worker each, never overlaps its syncs and ends at the newest head, older events superseded', async () => {
  // A second replica: its own API and worker on the same task queue, Temporal and Postgres.
  const replica = await startTestStack({
    worker: true,
    env: { ...fakeGithubEnv(fake, SECRET), TEMPORAL_TASK_QUEUE: stack.config.temporal.taskQueue },
  });
  let i = 0;
  const r = await syncedRepo(db(), fake, org.organizationId, () => (i % 2 === 0 ? stack : replica), SECRET);
  const pushes = [];
  try {
    for (i = 0; i < 10; i++) pushes.push(await r.push({ ...FILES, 'plugins/demo/skills/hello/SKILL.md': `# Hello ${i}` }));
  } finally {
    await replica.stop();
  }
  for (const token of fake.issuedTokens) expect(JSON.stringify(replica.logs)).not.toContain(token);
  expect(pushes.every((p) => p.response.status === 202)).toBe(true);
  const newest = pushes[9]!;
  expect(await eventOf(r, newest.deliveryId)).toMatchObject({ status: 'completed', syncedSha: newest.sha });
  const events = await waitFor(async () => {
    const all = await eventsOf(r);
    return all.length === 10 && all.every((e) => e.status !== 'queued' && e.status !== 'running') && all;
  });
  const superseded = events.filter((e) => e.status === 'superseded');
  expect(superseded.length).toBeGreaterThan(0);
  expect(events.filter((e) => e.status !== 'superseded').every((e) => e.status === 'completed' && e.syncedSha === e.headSha)).toBe(true);
  expect(fake.maxConcurrentPerRepository()).toBe(1);
  const target = await targetRow(r.targetId);
  expect(target.synced_sha).toBe(newest.sha);
  expect((await filesOf(r.targetId)).find((f) => f.path.endsWith('SKILL.md'))?.content).toBe('# Hello 9');
});

it('a SKILL.md that is a link to docs/skill.md syncs that file under SKILL.md; a linked directory, links out or round a loop, and a submodule are listed as such', async () => {
  const r = await newRepo();
  const commit = 'a1'.repeat(20);
  const files = {
    'docs/skill.md': '# Skill\nKept in docs.',
    'SKILL.md': { symlink: 'docs/skill.md' },
    'shared/hello/SKILL.md': '# Hello',
    'skills/hello': { symlink: '../shared/hello' },
    'skills/escape/SKILL.md': { symlink: '../../../etc/passwd' },
    'skills/loop': { symlink: '..' },
    'plugins/vendored': { submodule: commit },
  };
  const first = await r.push(files);
  expect(await eventOf(r, first.deliveryId)).toMatchObject({ status: 'completed', syncedSha: first.sha });
  const headers = org.owner.headers;
  const listed = await stack.request('GET', `/v1/connectors/github/targets/${r.targetId}/files?content=true`, { headers });
  expect(listed.status).toBe(200);
  const view = (path: string) => listed.json.files.find((f: { path: string }) => f.path === path);
  expect(listed.json.files.map((f: { path: string }) => f.path)).toEqual([
    'SKILL.md',
    'plugins/vendored',
    'shared/hello/SKILL.md',
    'skills/escape/SKILL.md',
    'skills/hello/SKILL.md',
    'skills/loop',
  ]);
  expect(view('SKILL.md')).toMatchObject({
    status: 'ok',
    type: 'symlink',
    linkTarget: 'docs/skill.md',
    blobSha: gitBlobSha('# Skill\nKept in docs.'),
    content: '# Skill\nKept in docs.',
  });
  expect(view('skills/hello/SKILL.md')).toMatchObject({
    status: 'ok',
    type: 'file',
    linkTarget: 'shared/hello/SKILL.md',
    content: '# Hello',
  });
  expect(view('skills/escape/SKILL.md')).toMatchObject({ status: 'skipped', type: 'symlink', error: 'symlink_outside', content: null });
  expect(view('skills/loop')).toMatchObject({ status: 'skipped', type: 'symlink', error: 'symlink_loop', linkTarget: '..' });
  expect(view('plugins/vendored')).toMatchObject({ status: 'skipped', type: 'submodule', error: 'submodule', commitSha: commit });
  // The submodule is never fetched: no call names its commit.
  expect(fake.calls.filter((c) => c.path.includes(commit))).toEqual([]);
  const shown = await stack.request('GET', `/v1/connectors/github/targets/${r.targetId}`, { headers });
  expect(shown.json).toMatchObject({
    skipped: { submodule: 1, symlink_loop: 1, symlink_outside: 1 },
    lastSync: { status: 'completed', counts: { added: 3, skipped: 3 } },
  });

  // The linked file changes: the link's path takes its new content, and only that blob is fetched.
  const blobs = () => callsFor(r, 'blob').map((c) => c.path.split('/').at(-1));
  const before = blobs().length;
  const second = await r.push({ ...files, 'docs/skill.md': '# Skill, changed' });
  expect(await eventOf(r, second.deliveryId)).toMatchObject({ status: 'completed' });
  const changed = await stack.request('GET', `/v1/connectors/github/targets/${r.targetId}/files?content=true`, { headers });
  expect(changed.json.files.find((f: { path: string }) => f.path === 'SKILL.md')).toMatchObject({
    content: '# Skill, changed',
    linkTarget: 'docs/skill.md',
  });
  // The three links' blobs (read each sync for the path they name) and the changed file.
  expect(blobs().slice(before).sort()).toEqual(
    [
      gitBlobSha('docs/skill.md'),
      gitBlobSha('../shared/hello'),
      gitBlobSha('../../../etc/passwd'),
      gitBlobSha('..'),
      gitBlobSha('# Skill, changed'),
    ].sort(),
  );
});

it('no token, key or JWT appears in the logs', () => {
  const text = JSON.stringify(stack.logs);
  expect(fake.issuedTokens.length).toBeGreaterThan(0);
  for (const token of fake.issuedTokens) expect(text).not.toContain(token);
  expect(text).not.toContain('PRIVATE KEY');
  expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/);
});

describe('target routes', () => {
  it('creates idempotently, shows the sync, lists files with bounded content, forces a full resync and deletes', async () => {
    const r = await newRepo();
    const pushed = await r.push(FILES);
    await eventOf(r, pushed.deliveryId);
    const headers = org.owner.headers;

    const again = await stack.request('POST', '/v1/connectors/github/targets', {
      headers,
      body: { installationId: r.installationId, repository: r.fullName, ref: 'master' },
    });
    expect(again.status).toBe(200);
    expect(again.json.targetId).toBe(r.targetId);
    const fresh = await stack.request('POST', '/v1/connectors/github/targets', {
      headers,
      body: { installationId: r.installationId, repository: r.fullName },
    });
    expect(fresh.status).toBe(201);
    expect(fresh.json).toMatchObject({ ref: null, sync: 'idle', syncedSha: null, lastSync: null });
    expect(
      (await stack.request('POST', '/v1/connectors/github/targets', { headers, body: { installationId: 1, repository: 'nope' } })).status,
    ).toBe(400);

    const shown = await stack.request('GET', `/v1/connectors/github/targets/${r.targetId}`, { headers });
    expect(shown.status).toBe(200);
    expect(shown.json).toMatchObject({
      targetId: r.targetId,
      repository: r.fullName,
      ref: 'refs/heads/master',
      status: 'active',
      sync: 'idle',
      syncedSha: pushed.sha,
      pendingSha: null,
      lastSync: { status: 'completed', attempts: 1, counts: { added: 4, changed: 0, removed: 0, skipped: 0, invalid: 0 }, error: null },
    });
    const list = await stack.request('GET', '/v1/connectors/github/targets', { headers });
    expect(list.json.targets.map((t: { targetId: string }) => t.targetId)).toEqual(
      expect.arrayContaining([r.targetId, fresh.json.targetId]),
    );

    const files = await stack.request('GET', `/v1/connectors/github/targets/${r.targetId}/files`, { headers });
    expect(files.status).toBe(200);
    expect(files.json.files).toHaveLength(4);
    expect(files.json.files[2]).toEqual({
      path: 'plugins/demo/.claude-plugin/plugin.json',
      blobSha: gitBlobSha(PLUGIN),
      size: PLUGIN.length,
      status: 'ok',
      type: 'file',
    });
    const withContent = await stack.request('GET', `/v1/connectors/github/targets/${r.targetId}/files?content=true`, { headers });
    expect(withContent.json.files[2].content).toBe(PLUGIN);

    const blobsBefore = callsFor(r, 'blob').length;
    const forced = await stack.request('POST', `/v1/connectors/github/targets/${r.targetId}/sync`, { headers });
    expect(forced.status).toBe(202);
    await waitFor(async () => {
      const row = await db().selectFrom('github_sync_events').select('status').where('id', '=', forced.json.eventId).executeTakeFirst();
      return row?.status === 'completed';
    });
    expect(callsFor(r, 'blob').length - blobsBefore).toBe(4);

    expect((await stack.request('DELETE', `/v1/connectors/github/targets/${fresh.json.targetId}`, { headers })).status).toBe(204);
    expect((await stack.request('GET', `/v1/connectors/github/targets/${fresh.json.targetId}`, { headers })).status).toBe(404);
    expect((await stack.request('DELETE', `/v1/connectors/github/targets/${fresh.json.targetId}`, { headers })).status).toBe(404);
  });

  it('answers 404 to members and to other organizations on every target route, 400 to a malformed id, 401 without a key', async () => {
    const r = await newRepo();
    const member = await org.addMember('member');
    const stranger = await createTestOrg(db());
    const path = `/v1/connectors/github/targets/${r.targetId}`;
    for (const suffix of ['', '/files']) {
      expect((await stack.request('GET', path + suffix, { headers: stranger.owner.headers })).status).toBe(404);
    }
    expect((await stack.request('POST', `${path}/sync`, { headers: stranger.owner.headers })).status).toBe(404);
    expect((await stack.request('DELETE', path, { headers: stranger.owner.headers })).status).toBe(404);
    const asMember: [string, string, unknown?][] = [
      ['GET', '/v1/connectors/github/targets'],
      ['POST', '/v1/connectors/github/targets', { installationId: r.installationId, repository: r.fullName }],
      ['GET', path],
      ['GET', `${path}/files`],
      ['POST', `${path}/sync`],
      ['DELETE', path],
    ];
    const before = await countTargets();
    for (const [method, url, body] of asMember) {
      const res = await stack.request(method, url, { headers: member.headers, ...(body === undefined ? {} : { body }) });
      expect([method, url, res.status, res.json]).toEqual([
        method,
        url,
        404,
        { error: 'not_found', message: 'No such target in this organization.' },
      ]);
    }
    // The member's create and delete changed nothing.
    expect(await countTargets()).toBe(before);
    expect((await stack.request('GET', '/v1/connectors/github/targets/not-an-id', { headers: org.owner.headers })).status).toBe(400);
    expect((await stack.request('GET', path)).status).toBe(401);
    expect(await targetRow(r.targetId)).toBeDefined();
  });
});
