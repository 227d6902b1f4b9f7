/**
 * GitHub's rate limits and tokens as GitHub documents them, over the real stack against the fake
 * GitHub, with one clock the test moves for both (the API, the worker's GitHub activities and the
 * fake): a primary limit is waited out until its `x-ratelimit-reset`, however far, a secondary one
 * without headers at least a minute and then twice that, each on a workflow timer, without using
 * one of the sync's attempts (there is only one here), and for every target of the installation.
 * A token GitHub revoked, or one past its `expires_at`, is replaced rather than failing the sync.
 */
import { randomUUID } from 'node:crypto';
import { githubTargetWorkflowId } from '../../src/github/contract';
import { startFakeGithub, type FakeGithub } from '../harness/fake-github';
import { fakeGithubEnv, syncedRepo, type SyncedRepo } from '../harness/github-sync';
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
const clock = { offset: 0, now: () => Date.now() + clock.offset };
let fake: FakeGithub;
let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
/** Synced at the start: by the token tests, its token is older than the 5 s in which @octokit/auth-app itself retries a 401. */
let early: SyncedRepo;

beforeAll(async () => {
  fake = await startFakeGithub({ now: clock.now });
  stack = await startTestStack({
    worker: true,
    now: clock.now,
    env: { ...fakeGithubEnv(fake, SECRET), GITHUB_SYNC_MAX_ATTEMPTS: '1', GITHUB_RATE_LIMIT_RECHECK: '500ms' },
  });
  org = await createTestOrg(stack.services.database.db);
  early = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
  const first = await early.push(FILES);
  expect(await ended(early, first.deliveryId)).toMatchObject({ status: 'completed' });
});
afterAll(async () => {
  await stack.stop();
  await fake.close();
});

const db = () => stack.services.database.db;
const FILES = { '.claude-plugin/marketplace.json': '{"name":"market","plugins":[]}' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const eventOf = (r: SyncedRepo, deliveryId: string) =>
  db()
    .selectFrom('github_sync_events')
    .selectAll()
    .where('target_id', '=', r.targetId)
    .where('delivery_id', '=', deliveryId)
    .executeTakeFirst();
const ended = (r: SyncedRepo, deliveryId: string) =>
  waitFor(
    async () => {
      const event = await eventOf(r, deliveryId);
      return event && !['queued', 'running'].includes(event.status) && event;
    },
    20_000,
    { what: `the sync of ${deliveryId}` },
  );
const view = async (r: SyncedRepo) =>
  (await stack.request('GET', `/v1/connectors/github/targets/${r.targetId}`, { headers: org.owner.headers })).json;
const callsOf = (installationId: number) => fake.calls.filter((c) => c.installationId === installationId);
const limited = (r: SyncedRepo) =>
  waitFor(async () => (await view(r)).sync === 'rate_limited' && view(r), 10_000, { what: `${r.fullName} rate limited` });

it('a primary limit with its reset 40 minutes away waits until then on a timer, for every target of the installation, then succeeds', async () => {
  const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
  const sibling = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET, { installationId: r.installationId });
  fake.commit(sibling.fullName, sibling.installationId, 'master', FILES);
  const exhaustedAt = clock.now();
  fake.exhaustRateLimit(r.installationId, 40 * 60_000);

  const pushed = await r.push(FILES);
  const shown = await limited(r);
  // x-ratelimit-reset is in whole seconds.
  const resetAt = Date.parse(shown.until);
  expect(resetAt - (exhaustedAt + 40 * 60_000)).toBeGreaterThanOrEqual(0);
  expect(resetAt - (exhaustedAt + 40 * 60_000)).toBeLessThan(1000);
  const installation = await db()
    .selectFrom('github_installations')
    .selectAll()
    .where('installation_id', '=', String(r.installationId))
    .executeTakeFirstOrThrow();
  expect(installation.rate_limited_until?.getTime()).toBe(resetAt);
  const refused = callsOf(r.installationId).filter((c) => c.status === 403);
  expect(refused).toHaveLength(1);

  // The other target of the installation waits too, without asking GitHub anything.
  const siblingPush = await sibling.push({ ...FILES, '.mcp.json': '{}' });
  expect((await limited(sibling)).until).toBe(new Date(resetAt).toISOString());
  await sleep(2500);
  expect(callsOf(r.installationId)).toEqual(refused);
  expect(fake.calls.filter((c) => c.repository === sibling.fullName.toLowerCase())).toHaveLength(0);
  expect(await eventOf(r, pushed.deliveryId)).toMatchObject({ status: 'running', attempts: 0, error_code: 'rate_limited' });

  // The wait is a timer (re-read every GITHUB_RATE_LIMIT_RECHECK), not an attempt: the history holds timers and no failure.
  const history = await stack.services.temporal.client.workflow.getHandle(githubTargetWorkflowId(r.targetId)).fetchHistory();
  expect((history.events ?? []).filter((e) => e.timerStartedEventAttributes).length).toBeGreaterThanOrEqual(2);

  clock.offset += 40 * 60_000;
  expect(await ended(r, pushed.deliveryId)).toMatchObject({ status: 'completed', attempts: 1, error_code: null });
  expect(await ended(sibling, siblingPush.deliveryId)).toMatchObject({ status: 'completed', attempts: 1 });
  // No call reached GitHub before the reset.
  const after = callsOf(r.installationId).filter((c) => c.kind !== 'token' && c.at > refused[0]!.at);
  expect(after.length).toBeGreaterThan(0);
  expect(after.every((c) => c.at >= resetAt)).toBe(true);
  expect(await view(r)).toMatchObject({ sync: 'idle', until: null, lastSync: { status: 'completed', attempts: 1 } });
});

it('a secondary limit without headers waits at least 60 s, then twice that, and uses no attempt', async () => {
  const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
  fake.secondaryRateLimit(r.installationId, { times: 2 });
  const start = clock.now();
  const pushed = await r.push(FILES);
  const first = await limited(r);
  expect(Date.parse(first.until) - start).toBeGreaterThanOrEqual(60_000);
  expect(Date.parse(first.until) - start).toBeLessThan(65_000);
  const hits = () => callsOf(r.installationId).filter((c) => c.status === 403);
  expect(hits()).toHaveLength(1);
  await sleep(1500);
  expect(hits()).toHaveLength(1);

  // A minute later GitHub limits it again: the next wait doubles.
  clock.offset += 61_000;
  // The fake answers the 403 before the sync records the wait: wait for the target to show it.
  const second = await waitFor(
    async () => {
      const shown = hits().length === 2 && (await view(r));
      return shown && shown.sync === 'rate_limited' && shown;
    },
    10_000,
    { what: 'the second limit' },
  );
  const secondAt = hits()[1]!.at;
  expect(second.sync).toBe('rate_limited');
  expect(Date.parse(second.until) - secondAt).toBeGreaterThanOrEqual(120_000);
  expect(Date.parse(second.until) - secondAt).toBeLessThan(125_000);
  expect(hits()[1]!.at - hits()[0]!.at).toBeGreaterThanOrEqual(60_000);

  clock.offset += 121_000;
  expect(await ended(r, pushed.deliveryId)).toMatchObject({ status: 'completed', attempts: 1, error_code: null });
  // GitHub answered again: the next limit without headers starts from a minute.
  const installation = await db()
    .selectFrom('github_installations')
    .selectAll()
    .where('installation_id', '=', String(r.installationId))
    .executeTakeFirstOrThrow();
  expect(installation.rate_limit_strikes).toBe(0);
});

it('a token GitHub revoked is dropped and a new one asked for once: the sync completes', async () => {
  const r = early;
  const tokensBefore = fake.calls.filter((c) => c.kind === 'token').length;
  fake.revokeTokens(r.installationId);
  const second = await r.push({ ...FILES, '.mcp.json': '{"mcpServers":{}}' });
  expect(await ended(r, second.deliveryId)).toMatchObject({ status: 'completed', attempts: 1 });
  const refused = callsOf(r.installationId).filter((c) => c.status === 401);
  expect(refused).toHaveLength(1);
  expect(fake.calls.filter((c) => c.kind === 'token').length).toBe(tokensBefore + 1);
});

it('a token past its expires_at is renewed before it is used: GitHub never answers 401', async () => {
  const r = await syncedRepo(db(), fake, org.organizationId, () => stack, SECRET);
  const first = await r.push(FILES);
  expect(await ended(r, first.deliveryId)).toMatchObject({ status: 'completed' });
  // GitHub's tokens live an hour; @octokit/auth-app alone keeps one 59 minutes of its own clock, whatever expires_at says.
  clock.offset += 61 * 60_000;
  const second = await r.push({ ...FILES, '.mcp.json': '{"mcpServers":{}}' });
  expect(await ended(r, second.deliveryId)).toMatchObject({ status: 'completed', attempts: 1 });
  expect(callsOf(r.installationId).filter((c) => c.status === 401)).toEqual([]);
});
