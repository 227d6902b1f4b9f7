/**
 * Admission per organization on the real stack: one organization's flood is shed with the answer
 * its sender retries (GitHub 503, a runtime 429, both with Retry-After), while its signed Slack
 * events and a leased run's heartbeat are never shed, another organization's requests are acked,
 * and the rate is shared by two API processes through Postgres.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { AdmissionControl } from '../../src/app/admission';
import { AppError } from '../../src/app/errors';
import { slackEventWorkflowId } from '../../src/slack/contract';
import { deliver, pushWithTarget } from '../harness/github';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runsClient } from '../harness/runs';
import {
  appMention,
  createTestSlackConnection,
  eventEnvelope,
  newSlackUserId,
  postSlackEvent,
  startFakeSlack,
  type FakeSlack,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const GITHUB_SECRET = `gh-${randomUUID()}`;
/** One request a second over 10 s windows: 10 units per organization and window. */
const WINDOW_MS = 10_000;
const UNITS = 10;
const ENV = {
  ADMISSION_ORG_RATE: '1',
  ADMISSION_RATE_WINDOW: `${WINDOW_MS / 1000}s`,
  // These tests send past the rate back to back without waiting out Retry-After and count each
  // window's refusals: holding the impatient sender would carry its requests into the next
  // window. The hold has its own test (test/platform/admission-delay.test.ts).
  ADMISSION_REFUSAL_HOLD: '0s',
  GITHUB_WEBHOOK_SECRET: GITHUB_SECRET,
};

let slack: FakeSlack;
let stack: TestStack;
let replica: TestStack;

beforeAll(async () => {
  slack = await startFakeSlack();
  stack = await startTestStack({ worker: true, env: { ...ENV, SLACK_API_BASE_URL: slack.url } });
  // A second API process on the same Postgres and Temporal: another replica.
  replica = await startTestStack({ env: { ...ENV, SLACK_API_BASE_URL: slack.url, TEMPORAL_TASK_QUEUE: stack.config.temporal.taskQueue } });
});
afterAll(async () => {
  await replica?.stop();
  await stack?.stop();
  await slack?.close();
});

/** Waits for the start of a window, so a burst stays inside one. */
const windowStart = () => waitFor(() => Date.now() % WINDOW_MS < 1500, WINDOW_MS + 1000, { what: 'a window to start', intervalMs: 50 });

const metric = (text: string, labels: string) => Number(new RegExp(`^den_admission_total\\{${labels}\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);

describe('a flood from one organization', () => {
  it('is shed with 429 + Retry-After (runtime), never for its Slack events, while another organization is acked', async () => {
    const db = stack.services.database.db;
    const flooder = await createTestOrg(db);
    const quiet = await createTestOrg(db);
    const connection = await createTestSlackConnection(db, stack.services.secretKey, flooder.organizationId, { slack });
    const a = runsClient(stack, flooder.owner.headers);
    const b = runsClient(stack, quiet.owner.headers);
    await windowStart();
    const flood = await Promise.all(Array.from({ length: 25 }, () => a.postEvent(newRunId(), event(1, 1))));
    const statuses = flood.map((res) => res.status);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(UNITS);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(25 - UNITS);
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    const shed = flood.find((res) => res.status === 429)!;
    expect(shed.json).toMatchObject({ error: 'rate_limited' });
    expect(Number(shed.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    // Slack retries an event three times and never after: its events are acked past the share.
    const envelope = eventEnvelope(connection, appMention(newSlackUserId()));
    const mention = await postSlackEvent(stack, connection, envelope);
    expect(mention.status).toBe(200);
    expect(mention.json).toEqual({ ok: true });
    const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
    expect((await handle.describe()).status.name).toBeDefined();

    for (let i = 0; i < 3; i++) expect((await b.postEvent(newRunId(), event(1, 1))).status).toBe(200);

    const metrics = (await stack.request('GET', '/metrics')).text;
    expect(metric(metrics, 'class="default",mode="shed",result="shed_rate"')).toBeGreaterThanOrEqual(25 - UNITS);
    expect(metrics).not.toContain(flooder.organizationId);
  });

  it("never sheds a heartbeat of a run that holds its lease, while the same organization's events are shed", async () => {
    const org = await createTestOrg(stack.services.database.db);
    const runs = runsClient(stack, org.owner.headers);
    const runId = newRunId();
    expect((await runs.postEvent(runId, event(1, 1))).status).toBe(200);
    await runs.waitForStatus(runId, ['running']);
    // Spend the rest of the window's units, and more.
    await Promise.all(Array.from({ length: UNITS + 2 }, () => runs.postEvent(newRunId(), event(1, 1))));
    expect((await runs.postEvent(newRunId(), event(1, 1))).status).toBe(429);
    expect((await runs.heartbeat(runId, 1)).status).toBe(200);
  });

  it("answers GitHub deliveries past the share 503 overloaded with Retry-After, and acks GitHub's redelivery of them in a later window", async () => {
    const db = stack.services.database.db;
    const org = await createTestOrg(db);
    const payload = await pushWithTarget(db, org.organizationId);
    const deliveries = Array.from({ length: UNITS + 5 }, () => ({
      event: 'push',
      deliveryId: randomUUID(),
      payload: { ...payload, after: randomBytes(20).toString('hex') },
      secret: GITHUB_SECRET,
    }));
    await windowStart();
    const answers = await Promise.all(deliveries.map((d) => deliver(stack, d)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 202).length).toBeLessThanOrEqual(UNITS);
    expect(statuses.filter((s) => s === 503).length).toBeGreaterThanOrEqual(5);
    expect(statuses.every((s) => s === 202 || s === 503)).toBe(true);
    const shed = answers.find((a) => a.status === 503)!;
    expect(shed.json).toEqual({ ok: false, error: 'overloaded' });
    expect(Number(shed.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    // GitHub's redelivery (the reconcile asks for it) keeps the delivery id and the body.
    const refused = deliveries.filter((_, i) => statuses[i] === 503);
    await waitFor(() => Date.now() % WINDOW_MS > WINDOW_MS - 1000, WINDOW_MS + 1000, { what: 'the window to end', intervalMs: 50 });
    await windowStart();
    const again = await Promise.all(refused.slice(0, UNITS).map((d) => deliver(stack, d)));
    expect(again.map((a) => a.status)).toEqual(Array(Math.min(UNITS, refused.length)).fill(202));
    const ids = refused.slice(0, UNITS).map((d) => d.deliveryId);
    await waitFor(
      async () =>
        (await db.selectFrom('github_sync_events').select('delivery_id').where('delivery_id', 'in', ids).execute()).length === ids.length,
      20_000,
      { what: 'the redelivered pushes to be recorded' },
    );
  }, 60_000);
});

describe('the rate across replicas', () => {
  it('holds for two API processes: one window admits its units, whichever replica takes them', async () => {
    const org = await createTestOrg(stack.services.database.db);
    await windowStart();
    const statuses: number[] = [];
    // New runs' events (Slack events, never shed for their share, cannot show it).
    for (let i = 0; i < 3 * UNITS; i++)
      statuses.push((await runsClient([stack, replica][i % 2]!, org.owner.headers).postEvent(newRunId(), event(1, 1))).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(UNITS);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2 * UNITS);
    // Both replicas admitted some: the units are shared, not each replica's own.
    expect(statuses.filter((s, i) => s === 200 && i % 2 === 1).length).toBeGreaterThan(0);
  }, 30_000);
});

describe('in flight per process', () => {
  it('sheds a second engine call of an organization past ADMISSION_ORG_IN_FLIGHT, and admits it once the first is answered', async () => {
    const admission = new AdmissionControl({
      db: stack.services.database.db,
      log: stack.services.log,
      metrics: stack.services.metrics,
      settings: {
        enabled: true,
        inFlight: 1,
        ratePerSecond: 1000,
        windowMs: 1000,
        batch: 5,
        waitMaxMs: 2000,
        queueWaitMs: 0,
        delayTargetMs: 200,
      },
      weightOf: async () => 1,
    });
    const tenant = `tenant-${randomUUID()}`;
    const first = await admission.admit(tenant, 'shed');
    const refused = await admission.admit(tenant, 'shed').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe('shed');
    // Another organization is not held up by this one's line.
    (await admission.admit(`tenant-${randomUUID()}`, 'shed')).release();
    // A waiting call gets the slot the first hands back.
    const waiting = admission.admit(tenant, 'wait');
    first.release();
    (await waiting).release();
    (await admission.admit(tenant, 'shed')).release();
  });
});

describe('a spent window', () => {
  it('sheds without a Postgres write once the window is known spent, shedIfSpent refuses without I/O, and the next window admits again', async () => {
    const db = stack.services.database.db;
    // A clock held at the start of the current second: the test's windows are current, so no sweep takes their rows.
    let now = Math.floor(Date.now() / 1000) * 1000;
    const admission = new AdmissionControl({
      db,
      log: stack.services.log,
      metrics: stack.services.metrics,
      settings: {
        enabled: true,
        inFlight: 100,
        ratePerSecond: 3,
        windowMs: 1000,
        batch: 1,
        waitMaxMs: 0,
        queueWaitMs: 0,
        delayTargetMs: 200,
      },
      weightOf: async () => 1,
      now: () => now,
    });
    const tenant = `tenant-${randomUUID()}`;
    const used = async () =>
      Number((await db.selectFrom('admission_windows').select('used').where('key', '=', `org:${tenant}`).executeTakeFirst())?.used ?? 0);
    for (let i = 0; i < 3; i++) (await admission.admit(tenant, 'shed')).release();
    expect(() => admission.shedIfSpent(tenant)).not.toThrow();
    await expect(admission.admit(tenant, 'shed')).rejects.toMatchObject({ code: 'shed' });
    expect(() => admission.shedIfSpent(tenant)).toThrow(expect.objectContaining({ code: 'shed' }));
    // Even with room in the row again, this process does not ask Postgres for the rest of the window.
    await db.updateTable('admission_windows').set({ used: 0 }).where('key', '=', `org:${tenant}`).execute();
    await expect(admission.admit(tenant, 'shed')).rejects.toMatchObject({ code: 'shed' });
    expect(await used()).toBe(0);
    now += 1000;
    expect(() => admission.shedIfSpent(tenant)).not.toThrow();
    (await admission.admit(tenant, 'shed')).release();
  });
});
