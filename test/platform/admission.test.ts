/**
 * Admission per organization on the real stack: one organization's flood is shed with the answer
 * its sender retries (Slack 503, a runtime 429, both with Retry-After), GitHub deliveries wait
 * instead, a leased run's heartbeat is never shed, another organization's requests are acked, and
 * the rate is shared by two API processes through Postgres.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Admission } from '../../src/app/admission';
import { AppError } from '../../src/app/errors';
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
  it('is shed with 429 + Retry-After (runtime) and 503 + Retry-After (Slack) while another organization is acked', async () => {
    const db = stack.services.database.db;
    const flooder = await createTestOrg(db);
    const quiet = await createTestOrg(db);
    const connection = await createTestSlackConnection(db, stack.services.secretKey, flooder.organizationId);
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

    const mention = await postSlackEvent(stack, connection, eventEnvelope(connection, appMention(newSlackUserId())));
    expect(mention.status).toBe(503);
    expect(mention.json).toMatchObject({ ok: false });
    expect(Number(mention.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    for (let i = 0; i < 3; i++) expect((await b.postEvent(newRunId(), event(1, 1))).status).toBe(200);

    const metrics = (await stack.request('GET', '/metrics')).text;
    expect(metric(metrics, 'class="default",mode="shed",result="shed_rate"')).toBeGreaterThanOrEqual(25 - UNITS + 1);
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

  it('lets GitHub deliveries wait for admission: every one is acked 202, none shed', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const payload = await pushWithTarget(stack.services.database.db, org.organizationId);
    await windowStart();
    const answers = await Promise.all(
      Array.from({ length: UNITS + 5 }, () =>
        deliver(stack, {
          event: 'push',
          deliveryId: randomUUID(),
          payload: { ...payload, after: randomBytes(20).toString('hex') },
          secret: GITHUB_SECRET,
        }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(UNITS + 5).fill(202));
    const metrics = (await stack.request('GET', '/metrics')).text;
    const delayed =
      metric(metrics, 'class="default",mode="wait",result="waited"') + metric(metrics, 'class="default",mode="wait",result="overdue"');
    expect(delayed).toBeGreaterThanOrEqual(5);
  }, 30_000);
});

describe('the rate across replicas', () => {
  it('holds for two API processes: one window admits its units, whichever replica takes them', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId);
    await windowStart();
    const statuses: number[] = [];
    for (let i = 0; i < 3 * UNITS; i++) {
      const envelope = eventEnvelope(connection, appMention(newSlackUserId()));
      statuses.push((await postSlackEvent([stack, replica][i % 2]!, connection, envelope)).status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(UNITS);
    expect(statuses.filter((s) => s === 503)).toHaveLength(2 * UNITS);
    // Both replicas admitted some: the units are shared, not each replica's own.
    expect(statuses.filter((s, i) => s === 200 && i % 2 === 1).length).toBeGreaterThan(0);
  }, 30_000);
});

describe('in flight per process', () => {
  it('sheds a second engine call of an organization past ADMISSION_ORG_IN_FLIGHT, and admits it once the first is answered', async () => {
    const admission = new Admission({
      db: stack.services.database.db,
      log: stack.services.log,
      metrics: stack.services.metrics,
      settings: { enabled: true, inFlight: 1, ratePerSecond: 1000, windowMs: 1000, batch: 5, waitMaxMs: 2000, queueWaitMs: 0 },
      classOf: async () => 'default',
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
