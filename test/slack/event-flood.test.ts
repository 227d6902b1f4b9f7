/**
 * No Slack event lost to our own shedding, over the real stack on production defaults and in the
 * production topology (the worker a process of its own, the API here): 300 signed events for one
 * connection in 10 s (Slack retries a refused event only three times and keeps no log of it)
 * while another organization floods GitHub. Every event is answered 200 and becomes its run:
 * never shed for its organization's share, its quota counted without a lock held across round
 * trips, and, where the engine is too busy to take its workflow within SLACK_EVENT_ACK_WAIT, kept
 * in Postgres and started after (src/slack/deferred-events.ts). The mentions come from 100 linked
 * members, three each, in a channel of their own, so no member, user or workspace limit and no
 * channel's pace is what is tested here.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { deliver, pushWithTarget } from '../harness/github';
import { loadConfig } from '../../src/main/config';
import { createTestOrg, type TestMember } from '../harness/identity';
import { spawnEntry, type Spawned } from '../harness/process';
import {
  appMention,
  createTestSlackConnection,
  eventEnvelope,
  linkSlackUser,
  postSlackEvent,
  startFakeSlack,
  type FakeSlack,
  type TestSlackConnection,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const GITHUB_SECRET = `gh-${randomUUID()}`;
const EVENTS = 300;
const SECONDS = 10;
const MEMBERS = 100;
/** GitHub deliveries in flight at once, each sent as soon as the one before it is answered. */
const FLOOD_CONNECTIONS = 16;

let slack: FakeSlack;
let stack: TestStack;
let worker: Spawned;
let connection: TestSlackConnection;
let users: string[];

beforeAll(async () => {
  slack = await startFakeSlack();
  const base = loadConfig();
  const taskQueue = `event-flood-${randomUUID()}`;
  worker = spawnEntry('src/bin/worker.ts', {
    DATABASE_URL: base.database.url,
    TEMPORAL_ADDRESS: base.temporal.address,
    WORKFLOW_BUNDLE_PATH: base.temporal.workflowBundlePath,
    SECRET_KEY: base.secretKey,
    DATA_DIR: base.dataDir,
    TEMPORAL_TASK_QUEUE: taskQueue,
    SLACK_API_BASE_URL: slack.url,
    LOG_LEVEL: 'warn',
  });
  stack = await startTestStack({
    env: { SLACK_API_BASE_URL: slack.url, GITHUB_WEBHOOK_SECRET: GITHUB_SECRET, TEMPORAL_TASK_QUEUE: taskQueue },
  });
  const db = stack.services.database.db;
  const org = await createTestOrg(db);
  connection = await createTestSlackConnection(db, stack.services.secretKey, org.organizationId, { slack });
  const members: TestMember[] = [];
  for (let i = 0; i < MEMBERS; i++) members.push(await org.addMember('member'));
  users = [];
  for (const member of members) users.push(await linkSlackUser(stack, connection, member));
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  worker?.child.kill('SIGTERM');
  await worker?.exited;
  await slack?.close();
});

/** Another organization's pushes, back to back over `FLOOD_CONNECTIONS`, until `until()`: their answers by status. */
async function githubFlood(until: () => boolean): Promise<Record<number, number>> {
  const org = await createTestOrg(stack.services.database.db);
  const payload = await pushWithTarget(stack.services.database.db, org.organizationId);
  const statuses: Record<number, number> = {};
  await Promise.all(
    Array.from({ length: FLOOD_CONNECTIONS }, async () => {
      while (!until()) {
        const push = { ...payload, after: randomBytes(20).toString('hex') };
        const answer = await deliver(stack, { event: 'push', deliveryId: randomUUID(), payload: push, secret: GITHUB_SECRET });
        statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
      }
    }),
  );
  return statuses;
}

/** `EVENTS` mentions, evenly over `SECONDS`, each sent on time whatever the answers before it take. */
async function mentions(): Promise<{ eventId: string; status: number; body: unknown }[]> {
  const start = Date.now();
  const sent: Promise<{ eventId: string; status: number; body: unknown }>[] = [];
  for (let i = 0; i < EVENTS; i++) {
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + (i * SECONDS * 1000) / EVENTS - Date.now())));
    const member = i % MEMBERS;
    const envelope = eventEnvelope(connection, appMention(users[member]!, `question ${i}`, `C0FLOOD${String(member).padStart(3, '0')}`));
    sent.push(
      postSlackEvent(stack, connection, envelope).then((res) => ({ eventId: envelope.event_id, status: res.status, body: res.json })),
    );
  }
  return Promise.all(sent);
}

it('300 signed events in 10 s, while another organization floods GitHub: every one answered 200, each its own run', async () => {
  let done = false;
  const flood = githubFlood(() => done);
  // The flood runs on its own for a moment first, as a noisy neighbour would.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const answers = await mentions();
  done = true;
  const floodStatuses = await flood;

  expect(answers.filter((a) => a.status !== 200)).toEqual([]);
  expect(answers.every((a) => JSON.stringify(a.body) === '{"ok":true}')).toBe(true);
  // The flood was one: GitHub's deliveries went on throughout, accepted or shed for their share.
  expect(Object.keys(floodStatuses).every((status) => status === '202' || status === '503')).toBe(true);
  expect(Object.values(floodStatuses).reduce((a, b) => a + b, 0)).toBeGreaterThan(3 * FLOOD_CONNECTIONS);

  // Each acked event became its own run: one row per event, each naming a run of its own that exists.
  const db = stack.services.database.db;
  const eventIds = answers.map((a) => a.eventId);
  const rows = await waitFor(
    async () => {
      const found = await db
        .selectFrom('slack_member_invocations')
        .select(['event_id', 'run_id'])
        .where('connection_id', '=', connection.connectionId)
        .execute();
      return found.length >= EVENTS ? found : undefined;
    },
    240_000,
    { what: 'every event to start its run', intervalMs: 1_000 },
  );
  expect(rows.map((r) => r.event_id).sort()).toEqual([...eventIds].sort());
  const runIds = [...new Set(rows.map((r) => r.run_id))];
  expect(runIds).toHaveLength(EVENTS);
  await waitFor(
    async () => (await db.selectFrom('automation_runs').select('run_id').where('run_id', 'in', runIds).execute()).length === EVENTS,
    60_000,
    { what: 'every run to be recorded', intervalMs: 1_000 },
  );
}, 420_000);
