/**
 * The reconcile's pace over 300 failed deliveries, end to end: the real worker and Postgres (a
 * database of its own), a fake GitHub whose App routes are rate-limited as GitHub's are (900
 * points a minute, a secondary limit when the test asks, 422 "spammed" when it asks), whose
 * redeliveries really send each delivery to the service again, and one clock for both, moved by
 * the test. The service runs on its defaults: 600 points a minute, 100 redeliveries a run.
 */
import { randomUUID } from 'node:crypto';
import { githubReconcileScheduleId, githubReconcileWorkflow, type GithubReconcileSummary } from '../../src/github/contract';
import { signGithubPayload } from '../../src/github/signature';
import { startFakeGithub, type FakeGithub, type FakeGithubCall } from '../harness/fake-github';
import { fakeGithubEnv, redeliverInto } from '../harness/github-sync';
import { ownDatabase } from '../harness/own-database';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
const BUDGET = 600;
const PER_RUN = 100;
let clock = Date.now();
const now = () => clock;
let fake: FakeGithub;
let database: Awaited<ReturnType<typeof ownDatabase>>;
let stack: TestStack;

beforeAll(async () => {
  fake = await startFakeGithub({ now, latencyMs: 2 });
  database = await ownDatabase();
  stack = await startTestStack({ worker: true, now, env: { ...fakeGithubEnv(fake, SECRET), DATABASE_URL: database.url } });
  redeliverInto(fake, () => stack);
});
afterAll(async () => {
  await stack?.stop();
  await database?.drop();
  await fake?.close();
});

const reconcileNow = () =>
  stack.ingress.execute({
    workflow: githubReconcileWorkflow,
    id: `${githubReconcileScheduleId(stack.config.temporal.taskQueue)}/test-${randomUUID()}`,
    args: [],
    tenancy: { tenant: 'operator', admission: 'bypass' },
    timeoutMs: 120_000,
  }) as Promise<Required<GithubReconcileSummary>>;

const APP_KINDS = new Set<FakeGithubCall['kind']>(['deliveries', 'delivery', 'redeliver']);
const appCalls = () => fake.calls.filter((c) => APP_KINDS.has(c.kind));
const points = (call: FakeGithubCall) => (call.method === 'GET' ? 1 : 5);

/** The most points the App's routes took in any 60 s, by the fake's clock. */
function busiestMinute(): number {
  const calls = appCalls();
  return Math.max(0, ...calls.map((c) => calls.filter((d) => d.at > c.at - 60_000 && d.at <= c.at).reduce((sum, d) => sum + points(d), 0)));
}

/** The attempts GitHub logged for a GUID, redeliveries that the service answered included. */
const acceptedAsks = (guid: string) =>
  fake.redeliveryRequests.filter((id) => fake.deliveries.find((d) => d.id === id)?.guid === guid).length;

it('300 failed deliveries: at most the budget a minute, a stop at the secondary limit until its wait is over, each redelivered once, the 422s asked again later', async () => {
  // Three kinds of failure a third each: our 503 (not a shed one: the reconcile reads its body, a GET), a 502, a timeout.
  const answers = [{ status: 503, body: '{"ok":false,"error":"unavailable"}' }, { status: 502, body: null }, { status: 0 }];
  const guids: string[] = [];
  for (let i = 0; i < 300; i++) {
    const guid = randomUUID();
    const raw = JSON.stringify({ zen: `ping ${i}`, hook_id: i + 1 });
    fake.logDelivery({ event: 'ping', guid, raw, signature: signGithubPayload(SECRET, raw) }, answers[i % 3]!);
    guids.push(guid);
  }
  const redelivered = () => fake.deliveries.filter((d) => d.redelivery && d.status_code === 200).length;
  // GitHub sends a redelivery once it took the ask: each run waits for the service's answers to be logged.
  const settle = () =>
    waitFor(() => redelivered() === fake.redeliveryRequests.length, 30_000, { what: 'every accepted redelivery answered' });

  // Run 1: GitHub takes 10 of its asks as spam (422); the run stops at its cap.
  fake.spamRedeliveries(10);
  const first = await reconcileNow();
  expect(first).toMatchObject({
    redeliveriesAsked: PER_RUN - 10,
    stoppedBy: 'run_cap',
    redeliveriesWaiting: 210,
    errors: [expect.stringMatching(/: 422 /)],
  });
  expect(fake.calls.filter((c) => c.kind === 'redeliver')).toHaveLength(PER_RUN);
  expect(fake.redeliveryRequests).toHaveLength(90);
  await settle();

  // Run 2, 30 s later: the same minute, so the budget stops it long before its cap.
  clock += 30_000;
  const second = await reconcileNow();
  expect(second.stoppedBy).toBe('budget');
  expect(first.pointsSpent + second.pointsSpent).toBeLessThanOrEqual(BUDGET);
  expect(Date.parse(second.resumeAt!)).toBeGreaterThan(clock);
  await settle();

  // Run 3, a minute on: GitHub answers the App's first call with a secondary limit (retry-after 120 s).
  clock += 61_000;
  fake.secondaryRateLimit('app', { retryAfterSeconds: 120 });
  const limitedAt = clock;
  const third = await reconcileNow();
  expect(third).toMatchObject({ stoppedBy: 'rate_limit', redeliveriesAsked: 0, resumeAt: new Date(limitedAt + 120_000).toISOString() });
  // Run 4, before the wait is over: no call to the App's routes at all.
  clock += 90_000;
  const callsBefore = appCalls().length;
  expect(await reconcileNow()).toMatchObject({ stoppedBy: 'rate_limit', pointsSpent: 0 });
  expect(appCalls().length).toBe(callsBefore);

  // Then, after the wait, a run a minute goes on from where the others stopped until nothing waits.
  clock = limitedAt + 121_000;
  const runs: Required<GithubReconcileSummary>[] = [];
  for (let i = 0; i < 8; i++) {
    const run = await reconcileNow();
    runs.push(run);
    await settle();
    if (run.redeliveriesWaiting === 0) break;
    clock += 61_000;
  }
  expect(runs.at(-1)).toMatchObject({ redeliveriesWaiting: 0, errors: [] });
  expect(appCalls().filter((c) => c.at > limitedAt && c.at < limitedAt + 120_000)).toEqual([]);

  // Every delivery redelivered exactly once; the 10 refused as spam were asked again on a later run, never given up.
  expect(guids.map(acceptedAsks).every((n) => n === 1)).toBe(true);
  const records = await stack.services.database.db.selectFrom('github_redeliveries').selectAll().execute();
  expect(records).toHaveLength(300);
  const spammed = records.filter((r) => r.tries === 2);
  expect(spammed).toHaveLength(10);
  expect(records.every((r) => r.outcome === 'asked' || r.outcome === 'delivered')).toBe(true);
  // No minute took more than the budget, nor a call the fake's own limit (900) refused.
  expect(busiestMinute()).toBeLessThanOrEqual(BUDGET);
  expect(appCalls().filter((c) => c.status === 403)).toHaveLength(1);
});
