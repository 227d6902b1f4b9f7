/**
 * Slack quotas counted in Postgres: replicas share one budget, a restart keeps it,
 * a full key takes nothing from the others, released units come back, an event kept while
 * Temporal is unreachable keeps its unit, and a refused write is a 503. Real HTTP, Temporal and Postgres; every stack here shares the suite's database.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { slackEventWorkflowId } from '../../src/slack/contract';
import { QUOTA_WINDOW_MS, SlackQuota } from '../../src/slack/quota';
import { windowStart } from '../../src/app/store/window-counter';
import { createTestOrg } from '../harness/identity';
import { closedPort } from '../harness/ports';
import {
  appMention,
  createTestSlackConnection,
  eventEnvelope,
  newSlackUserId,
  postSlackEvent,
  type TestSlackConnection,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';

// Every replica reads one frozen clock in the middle of the current window, so no test straddles
// a window boundary (a new window would start a new count). It stays within the ±300 s of Slack's
// signature check, whose requests are signed with the real time.
const NOW = windowStart(Date.now(), QUOTA_WINDOW_MS) + QUOTA_WINDOW_MS / 2;
const now = () => NOW;
const WINDOW = new Date(windowStart(NOW, QUOTA_WINDOW_MS));
const env = { SLACK_WORKSPACE_QUOTA_PER_MINUTE: '5', SLACK_USER_QUOTA_PER_MINUTE: '4' };

let a: TestStack;
let b: TestStack;
let organizationId: string;
const started: { stack: TestStack; workflowId: string }[] = [];

beforeAll(async () => {
  // No workers: only the front door's decision matters here.
  [a, b] = await Promise.all([startTestStack({ env, now }), startTestStack({ env, now })]);
  organizationId = (await createTestOrg(a.services.database.db)).organizationId;
});
afterAll(async () => {
  await Promise.all(
    started.map(({ stack, workflowId }) =>
      stack.services.temporal.client.workflow
        .getHandle(workflowId)
        .terminate('test done')
        .catch(() => undefined),
    ),
  );
  await Promise.all([a.stop(), b.stop()]);
});

const newConnection = () => createTestSlackConnection(a.services.database.db, a.services.secretKey, organizationId, { botToken: null });

/** Posts a mention through `stack`; the ack is the same whether or not it is routed. */
async function mention(stack: TestStack, connection: TestSlackConnection, user: string): Promise<string> {
  const envelope = eventEnvelope(connection, appMention(user));
  const res = await postSlackEvent(stack, connection, envelope);
  expect(res.status).toBe(200);
  expect(res.json).toEqual({ ok: true });
  return envelope.event_id;
}

/** Kept in Postgres until Temporal takes its workflow (src/slack/deferred-events.ts). */
async function kept(connection: TestSlackConnection, eventId: string): Promise<boolean> {
  const workflowId = slackEventWorkflowId(connection.connectionId, eventId);
  const row = await a.services.database.db
    .selectFrom('slack_deferred_events')
    .select('workflow_id')
    .where('workflow_id', '=', workflowId)
    .executeTakeFirst();
  return row !== undefined;
}

/** Routed means its workflow was started, or the event kept until Temporal takes it (when Temporal was slow to). */
async function routed(connection: TestSlackConnection, eventId: string): Promise<boolean> {
  const workflowId = slackEventWorkflowId(connection.connectionId, eventId);
  try {
    await a.services.temporal.client.workflow.getHandle(workflowId).describe();
    started.push({ stack: a, workflowId });
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return kept(connection, eventId);
    throw error;
  }
}

/** The units each key holds in the test's window, 0 for a key without a row. */
async function used(...keys: string[]): Promise<number[]> {
  const rows = await a.services.database.db
    .selectFrom('slack_quota_windows')
    .select(['key', 'used'])
    .where('key', 'in', keys)
    .where('window_start', '=', WINDOW)
    .execute();
  return keys.map((key) => rows.find((row) => row.key === key)?.used ?? 0);
}

const workspaceKey = (connection: TestSlackConnection) => `workspace:${connection.teamId}`;
const userKey = (connection: TestSlackConnection, user: string) => `user:${connection.teamId}:${user}`;

describe('two API replicas on one database', () => {
  it('share one user quota: alternating mentions route 4 of 8, and the refused 4 spend none of the workspace', async () => {
    const connection = await newConnection();
    const u1 = newSlackUserId();
    const outcomes: boolean[] = [];
    for (let i = 0; i < 8; i++) {
      outcomes.push(await routed(connection, await mention(i % 2 === 0 ? a : b, connection, u1)));
    }
    // Counted per process, each replica would have routed 4 of its own.
    expect(outcomes).toEqual([true, true, true, true, false, false, false, false]);
    expect(await used(userKey(connection, u1), workspaceKey(connection))).toEqual([4, 4]);

    // All or none: the workspace (5) still has the unit the refused mentions did not take.
    const u2 = newSlackUserId();
    expect(await routed(connection, await mention(b, connection, u2))).toBe(true);
    expect(await routed(connection, await mention(a, connection, newSlackUserId()))).toBe(false);
    expect(await used(workspaceKey(connection), userKey(connection, u2))).toEqual([5, 1]);

    const metrics = `${(await a.request('GET', '/metrics')).text}\n${(await b.request('GET', '/metrics')).text}`;
    expect(metrics).toMatch(/outcome="ineligible",reason="user_quota"\} 2/);
    expect(metrics).toMatch(/outcome="ineligible",reason="workspace_quota"\} 1/);

    // A restarted replica (a fresh instance on the same database) still sees the spent quota.
    const restarted = await startTestStack({ env, now });
    try {
      expect(await routed(connection, await mention(restarted, connection, u1))).toBe(false);
      expect(await used(userKey(connection, u1))).toEqual([4]);
      // …and routes what the quota allows.
      const other = await newConnection();
      expect(await routed(other, await mention(restarted, other, u1))).toBe(true);
    } finally {
      await restarted.stop();
    }
  });
});

describe('releasing units', () => {
  it('gives back the unit of a duplicate delivery', async () => {
    const connection = await newConnection();
    const user = newSlackUserId();
    const envelope = eventEnvelope(connection, appMention(user));
    for (const stack of [a, b]) {
      const res = await postSlackEvent(stack, connection, envelope);
      expect(res.status).toBe(200);
    }
    expect(await routed(connection, envelope.event_id)).toBe(true);
    expect(await used(userKey(connection, user), workspaceKey(connection))).toEqual([1, 1]);
    expect((await b.request('GET', '/metrics')).text).toMatch(/outcome="duplicate"/);
  });

  it('keeps the unit of an event kept while Temporal was unreachable, and gives back the unit of its retry', async () => {
    const connection = await newConnection();
    const user = newSlackUserId();
    expect(await routed(connection, await mention(a, connection, user))).toBe(true);
    const noTemporal = await startTestStack({ env: { ...env, TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}` }, now });
    try {
      const envelope = eventEnvelope(connection, appMention(user));
      for (let delivery = 0; delivery < 2; delivery++) {
        const res = await postSlackEvent(noTemporal, connection, envelope);
        expect(res.status).toBe(200);
        expect(res.json).toEqual({ ok: true });
      }
      expect(await kept(connection, envelope.event_id)).toBe(true);
    } finally {
      await noTemporal.stop();
      // No worker of another test file's sweep is to start it.
      await a.services.database.db.deleteFrom('slack_deferred_events').where('connection_id', '=', connection.connectionId).execute();
    }
    // The kept event holds its units, its retry none.
    expect(await used(userKey(connection, user), workspaceKey(connection))).toEqual([2, 2]);
  });

  it('takes from every key or from none, and releases once', async () => {
    const quota = new SlackQuota(a.services.database.db, a.services.log);
    const team = `T${newSlackUserId()}`;
    const checks = (user: string) => [
      { key: `workspace:${team}`, limit: 3 },
      { key: `user:${team}:${user}`, limit: 1 },
    ];
    const first = await quota.tryTake(checks('U1'), NOW);
    expect(first.ok).toBe(true);
    expect(await quota.tryTake(checks('U1'), NOW)).toEqual({ ok: false, key: `user:${team}:U1` });
    expect(await used(`workspace:${team}`)).toEqual([1]);
    expect((await quota.tryTake(checks('U2'), NOW)).ok).toBe(true);
    expect(await used(`workspace:${team}`, `user:${team}:U1`)).toEqual([2, 1]);

    if (!first.ok) throw new Error('expected the first take to pass');
    await first.release();
    await first.release();
    // Once: the second release did not take U2's workspace unit.
    expect(await used(`workspace:${team}`, `user:${team}:U1`, `user:${team}:U2`)).toEqual([1, 0, 1]);
    expect((await quota.tryTake(checks('U1'), NOW)).ok).toBe(true);
    // The next window starts from nothing.
    const next = NOW + QUOTA_WINDOW_MS;
    expect((await quota.tryTake(checks('U1'), next)).ok).toBe(true);
    await a.services.database.db
      .deleteFrom('slack_quota_windows')
      .where('window_start', '=', new Date(windowStart(next, QUOTA_WINDOW_MS)))
      .where('key', 'like', `%${team}%`)
      .execute();
  });
});

describe('expired windows', () => {
  it('are swept oldest first, a bounded batch at a time, and the previous window is kept', async () => {
    const db = a.services.database.db;
    const team = `T${newSlackUserId()}`;
    // Older than any window a test can write: the sweep, oldest first, reaches these before any other.
    const ancient = [0, 1, 2].map((i) => ({ key: `user:${team}:ancient${i}`, window_start: new Date(i * QUOTA_WINDOW_MS), used: 1 }));
    const previous = { key: `user:${team}:previous`, window_start: new Date(windowStart(NOW, QUOTA_WINDOW_MS) - QUOTA_WINDOW_MS), used: 1 };
    await db
      .insertInto('slack_quota_windows')
      .values([...ancient, previous])
      .execute();
    const left = async () =>
      (await db.selectFrom('slack_quota_windows').select('key').where('key', 'like', `user:${team}:%`).orderBy('key').execute()).map(
        (r) => r.key,
      );

    const quota = new SlackQuota(db, a.services.log, { sweepEvery: 2, sweepBatch: 2 });
    const take = () => quota.tryTake([{ key: `user:${team}:taker`, limit: 10 }], NOW);
    await take();
    expect(await left()).toHaveLength(5); // the first take does not sweep
    await take();
    expect(await left()).toEqual([`user:${team}:ancient2`, `user:${team}:previous`, `user:${team}:taker`]);
    await take();
    await take();
    expect(await left()).toEqual([`user:${team}:previous`, `user:${team}:taker`]);
  });
});

describe('Postgres refusing the write', () => {
  it('is a 503 naming postgres, and nothing is routed', async () => {
    const connection = await newConnection();
    // Reads answer and writes are refused (SQLSTATE 25006), as after a failover to a replica.
    const url = new URL(a.config.database.url!);
    url.searchParams.set('options', '-c default_transaction_read_only=on');
    const readOnly = await startTestStack({ env: { ...env, DATABASE_URL: url.toString() }, now });
    try {
      const envelope = eventEnvelope(connection, appMention(newSlackUserId()));
      const res = await postSlackEvent(readOnly, connection, envelope);
      expect(res.status).toBe(503);
      expect(res.json).toMatchObject({ error: 'unavailable', dependency: 'postgres' });
      expect(res.headers.get('retry-after')).toBe('5');
      expect(await routed(connection, envelope.event_id)).toBe(false);
      expect(await used(workspaceKey(connection))).toEqual([0]);
    } finally {
      await readOnly.stop();
    }
  });
});
