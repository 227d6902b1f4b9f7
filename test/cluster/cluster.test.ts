/**
 * The production topology, run for real: `npm run cluster`'s entry point started as a
 * child process — a Temporal server v1.29.1 with 8 history shards on Postgres, two API replicas
 * and two workers, each its own process — and real requests to both replicas. The tests run in
 * order: the last ones kill -9 a worker and an API replica.
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection, WorkflowIdReusePolicy, WorkflowNotFoundError } from '@temporalio/client';
import { createLogger } from '../../src/app/log';
import { openDatabase, type DbHandle } from '../../src/app/store/db';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/app/store/embedded-postgres';
import { migrateToLatest } from '../../src/app/store/migrate';
import { parseSecretKey } from '../../src/app/secrets';
import type { ClusterState } from '../../src/cluster/state';
import { githubDeliveryWorkflowId } from '../../src/github/contract';
import { runWorkflowId, type RunWorkflowInput } from '../../src/runs/contract';
import { slackEventWorkflowId } from '../../src/slack/contract';
import { deliver, pushWithTarget, type Payload } from '../harness/github';
import { setFairnessWeight } from '../../src/identity/store';
import { createTestOrg } from '../harness/identity';
import { freePort } from '../harness/ports';
import { outsideEnv } from '../harness/process';
import { launchClusterProcess, type ClusterProcess } from '../harness/cluster';
import {
  appMention,
  createTestSlackConnection,
  eventEnvelope,
  newSlackUserId,
  postSlackEvent,
  startFakeSlack,
  type FakeSlack,
} from '../harness/slack';
import { httpTarget, type HttpTarget } from '../harness/stack';
import { waitFor } from '../harness/wait';

const GITHUB_SECRET = `gh-${randomUUID()}`;
const SECRET_KEY = randomBytes(32).toString('hex');
const USER_QUOTA = 4;
const LEASE_SECONDS = 4;
/** Admission windows of 10 s: 500 units for an organization of weight 1, 10 for one of weight 0.02. */
const ADMISSION_WINDOW_MS = 10_000;
const LOWERED_UNITS = 10;

let dataDir: string;
let postgres: EmbeddedPostgres;
let database: DbHandle;
let slack: FakeSlack;
let cluster: ClusterProcess;
let state: ClusterState;
let apis: HttpTarget[];
let connection: Connection;
let temporal: Client;

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'den-cluster-'));
  // The cluster's Postgres is "the server in DATABASE_URL": one this test owns and can read.
  postgres = await startEmbeddedPostgres({
    // Under the test's data dir itself: it makes that traversable for the postgres user.
    dataDir,
    port: await freePort(),
    log: createLogger({ level: 'warn', name: 'cluster-test' }),
    logFile: path.join(dataDir, 'external-postgres.log'),
  });
  database = openDatabase(postgres.url);
  await migrateToLatest(database.db);
  slack = await startFakeSlack();

  cluster = await launchClusterProcess({
    DATA_DIR: dataDir,
    DATABASE_URL: postgres.url,
    SECRET_KEY,
    CLUSTER_API_REPLICAS: '2',
    CLUSTER_WORKERS: '2',
    GITHUB_WEBHOOK_SECRET: GITHUB_SECRET,
    SLACK_API_BASE_URL: slack.url,
    SLACK_USER_QUOTA_PER_MINUTE: String(USER_QUOTA),
    RUN_LEASE_TIMEOUT: `${LEASE_SECONDS}s`,
    RUN_MAX_ATTEMPTS: '1',
    ADMISSION_ORG_RATE: '50',
    ADMISSION_RATE_WINDOW: `${ADMISSION_WINDOW_MS / 1000}s`,
    // The rate test sends its events back to back within one window without waiting out
    // Retry-After, and counts the rate alone: a held refusal would carry them into the next
    // window, and the limit by delay is the delay tests' (test/platform/admission-delay.test.ts).
    ADMISSION_REFUSAL_HOLD: '0s',
    ADMISSION_DELAY_TARGET: '1h',
    LOG_LEVEL: 'info',
  });
  state = cluster.state;
  apis = state.api.map((api) => httpTarget(api.url));
  connection = await Connection.connect({ address: state.temporal.address });
  temporal = new Client({ connection, namespace: 'default' });
}, 16 * 60_000);

afterAll(async () => {
  await connection?.close().catch(() => undefined);
  await cluster?.stop();
  await slack?.close();
  await database?.close();
  await postgres?.stop();
  await fs.rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
}, 180_000);

/** GitHub's example branch push, moved onto a fresh repository that a new organization syncs. */
async function pushWithNewOrg(): Promise<Payload> {
  return pushWithTarget(database.db, (await createTestOrg(database.db)).organizationId);
}

async function workflowExists(workflowId: string): Promise<boolean> {
  try {
    await temporal.workflow.getHandle(workflowId).describe();
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

/** Executions with this id, open or closed, as Temporal's SQL visibility lists them. */
async function executionsOf(workflowId: string): Promise<number> {
  let count = 0;
  for await (const _ of temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) count++;
  return count;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('the cluster', () => {
  it('runs a Temporal server with the configured shards on Postgres, and answers /ready on every replica', async () => {
    const info = await connection.workflowService.getClusterInfo({});
    expect(info.historyShardCount).toBe(8);
    expect(info.persistenceStore).toBe('postgres12');
    expect(info.visibilityStore).toBe('postgres12');
    expect(apis).toHaveLength(2);
    for (const api of apis) expect((await api.request('GET', '/ready')).status).toBe(200);
    expect(state.workers).toHaveLength(2);
    expect(new Set([state.temporal.pid, ...state.api.map((a) => a.pid), ...state.workers.map((w) => w.pid)]).size).toBe(5);
  });
});

describe('den while the cluster runs', () => {
  it("writes to the cluster's Postgres: a key made by `den bootstrap` works on both replicas", async () => {
    // As an operator would run it: the cluster's DATA_DIR and nothing else, no DATABASE_URL.
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [
        path.resolve(__dirname, '../../bin/den.js'),
        'bootstrap',
        '--org-name',
        'cluster-cli',
        '--email',
        `owner-${randomUUID()}@example.com`,
      ],
      { env: { ...outsideEnv(), DATA_DIR: dataDir } as NodeJS.ProcessEnv, timeout: 60_000 },
    );
    expect(stderr).toContain(path.join(dataDir, 'cluster'));
    const { apiKey } = JSON.parse(stdout) as { apiKey: string };
    for (const api of apis) {
      const me = await api.request('GET', '/v1/me', { headers: { 'x-api-key': apiKey } });
      expect(me.status).toBe(200);
    }
  });
});

describe('one workflow per delivery across replicas', () => {
  it('the same Slack event sent concurrently to both replicas starts one workflow', async () => {
    const org = await createTestOrg(database.db);
    const key = parseSecretKey(SECRET_KEY);
    const connectionRow = await createTestSlackConnection(database.db, key, org.organizationId, { slack });
    const envelope = eventEnvelope(connectionRow, appMention(newSlackUserId()));
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => postSlackEvent(apis[i % 2]!, connectionRow, envelope)));
    expect(answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.text}`)).toEqual([]);
    const workflowId = slackEventWorkflowId(connectionRow.connectionId, envelope.event_id);
    expect(await workflowExists(workflowId)).toBe(true);
    await waitFor(async () => (await executionsOf(workflowId)) >= 1, 15_000, { what: 'visibility to list the Slack event' });
    expect(await executionsOf(workflowId)).toBe(1);
  });

  it('the same GitHub delivery sent concurrently to both replicas starts one workflow', async () => {
    const payload = await pushWithNewOrg();
    const deliveryId = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => deliver(apis[i % 2]!, { event: 'push', deliveryId, payload, secret: GITHUB_SECRET })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(202));
    const workflowId = githubDeliveryWorkflowId(deliveryId);
    await waitFor(async () => (await executionsOf(workflowId)) >= 1, 15_000, { what: 'visibility to list the delivery' });
    expect(await executionsOf(workflowId)).toBe(1);
  });
});

describe('Slack quotas are shared by the replicas', () => {
  it(`routes at most ${USER_QUOTA} of 8 mentions from one user alternating replicas`, async () => {
    // Fixed one-minute windows: keep all 8 inside one, so the limit is exactly the one under test.
    await waitFor(() => new Date().getSeconds() < 45, 20_000, { what: 'the start of a minute', intervalMs: 200 });
    const org = await createTestOrg(database.db);
    const connectionRow = await createTestSlackConnection(database.db, parseSecretKey(SECRET_KEY), org.organizationId, { slack });
    const user = newSlackUserId();
    const envelopes = Array.from({ length: 8 }, () => eventEnvelope(connectionRow, appMention(user)));
    for (const [i, envelope] of envelopes.entries()) {
      expect((await postSlackEvent(apis[i % 2]!, connectionRow, envelope)).status).toBe(200);
    }
    const routed = await Promise.all(envelopes.map((e) => workflowExists(slackEventWorkflowId(connectionRow.connectionId, e.event_id))));
    expect(routed.filter(Boolean)).toHaveLength(USER_QUOTA);
    // The first four, whichever replica took them: the count is shared, not per process.
    expect(routed.slice(0, USER_QUOTA).every(Boolean)).toBe(true);
  });
});

describe("an organization's admission rate is shared by the replicas", () => {
  it(`admits ${LOWERED_UNITS} of ${3 * LOWERED_UNITS} new runs' events in one window, alternating replicas, and sheds the rest 429 with Retry-After`, async () => {
    const org = await createTestOrg(database.db);
    // Weight 0.02: ADMISSION_ORG_RATE (50/s) × 10 s × 0.02 = 10 units a window, taken by each replica
    // in batches of ADMISSION_RATE_BATCH (5). (Slack events, never shed, cannot show it.)
    await setFairnessWeight(database.db, org.organizationId, 0.02);
    await waitFor(() => Date.now() % ADMISSION_WINDOW_MS < 2000, ADMISSION_WINDOW_MS + 1000, { what: 'a window to start', intervalMs: 50 });
    const answers = [];
    for (let i = 0; i < 3 * LOWERED_UNITS; i++) {
      const body = { attempt: 1, sequence: 1, type: 'user', payload: { n: i }, createdAt: Date.now() };
      answers.push(
        await apis[i % 2]!.request('POST', `/v1/automation-runs/run-${randomUUID()}/events`, { headers: org.owner.headers, body }),
      );
    }
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(LOWERED_UNITS);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2 * LOWERED_UNITS);
    expect(answers.filter((a) => a.status === 429).every((a) => Number(a.headers.get('retry-after')) >= 1)).toBe(true);
    // Both replicas admitted some: the units are the cluster's, not each replica's own.
    expect(statuses.filter((s, i) => s === 200 && i % 2 === 1).length).toBeGreaterThan(0);
    expect(statuses.filter((s, i) => s === 200 && i % 2 === 0).length).toBeGreaterThan(0);
  });
});

/** A queued run as the Slack feature starts it, for the org's owner to claim. */
async function queuedRun(organizationId: string, memberId: string): Promise<string> {
  const runId = `run-${randomUUID()}`;
  const input: RunWorkflowInput = {
    organizationId,
    runId,
    initialStatus: 'queued',
    createdAt: Date.now(),
    settings: {
      leaseTimeoutMs: LEASE_SECONDS * 1000,
      maxAttempts: 1,
      retryWindowMs: 60_000,
      maxDurationMs: 10 * 60_000,
      claimDeadlineMs: 5 * 60_000,
      continueAsNewEvents: 2000,
      eventBufferMax: 1000,
    },
    memberId,
    input: { text: 'cluster test' },
  };
  await temporal.workflow.start('automationRun', {
    workflowId: runWorkflowId(organizationId, runId),
    taskQueue: 'control-plane',
    args: [input],
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
  });
  return runId;
}

async function claim(api: HttpTarget, headers: Record<string, string>, runId: string): Promise<void> {
  const res = await waitFor(
    async () => {
      const answer = await api.request('POST', `/v1/automation-runs/${runId}/claim`, { headers, body: {} });
      return answer.status === 200 ? answer : undefined;
    },
    15_000,
    { what: `a claim of ${runId}` },
  );
  expect(res.json.attempt).toBe(1);
}

async function status(api: HttpTarget, headers: Record<string, string>, runId: string): Promise<string> {
  const res = await api.request('GET', `/v1/automation-runs/${runId}`, { headers });
  expect(res.status).toBe(200);
  return res.json.status as string;
}

async function heartbeatCounts(api: HttpTarget): Promise<{ forwarded: number; coalesced: number }> {
  const text = (await api.request('GET', '/metrics')).text;
  const read = (result: string) => Number(new RegExp(`^den_run_heartbeats_total\\{result="${result}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { forwarded: read('forwarded'), coalesced: read('coalesced') };
}

describe('runs across replicas and workers', () => {
  it('heartbeats for one run alternating replicas hold its lease; forwarded ÷ received is reported', async () => {
    const org = await createTestOrg(database.db);
    const headers = org.owner.headers;
    const runId = await queuedRun(org.organizationId, org.owner.memberId);
    await claim(apis[0]!, headers, runId);
    const before = await Promise.all(apis.map(heartbeatCounts));
    // Three leases long, a heartbeat every 200 ms, alternating replicas.
    const beats = (LEASE_SECONDS * 3 * 1000) / 200;
    for (let i = 0; i < beats; i++) {
      const res = await apis[i % 2]!.request('POST', `/v1/automation-runs/${runId}/heartbeat`, { headers, body: { attempt: 1 } });
      expect(res.status).toBe(200);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(await status(apis[1]!, headers, runId)).toBe('running');
    const after = await Promise.all(apis.map(heartbeatCounts));
    const forwarded = after.reduce((sum, a, i) => sum + a.forwarded - before[i]!.forwarded, 0);
    const received = after.reduce((sum, a, i) => sum + a.forwarded + a.coalesced - before[i]!.forwarded - before[i]!.coalesced, 0);
    expect(received).toBe(beats);
    // Each replica coalesces on its own: it forwards once the lease would hold less than 2 s past
    // the next beat it expects (src/runs/heartbeat-coalescer.ts). Each sees a beat every 400 ms, so
    // about one in four or five is forwarded (0.267 in one run here; the other replica's forwards do
    // not move its own view of the lease), where no coalescing would forward every one.
    expect(forwarded).toBeGreaterThan(0);
    expect(forwarded / received).toBeLessThan(0.4);
    process.stdout.write(
      `cluster heartbeats: ${forwarded} forwarded of ${received} received (${(forwarded / received).toFixed(3)}) over 2 replicas\n`,
    );
  });

  it('kill -9 of one worker while runs are leased: their lease timers still fire, through the other worker', async () => {
    const org = await createTestOrg(database.db);
    const headers = org.owner.headers;
    const runIds = await Promise.all(Array.from({ length: 4 }, () => queuedRun(org.organizationId, org.owner.memberId)));
    for (const runId of runIds) await claim(apis[0]!, headers, runId);
    const victim = state.workers[0]!.pid;
    process.kill(victim, 'SIGKILL');
    await waitFor(() => !alive(victim), 5000, { what: 'the worker to die' });
    // No heartbeats: every lease runs out, and with one attempt the run ends failed (lease_lost),
    // its workflow Failed (docs/operations.md).
    for (const runId of runIds) {
      const final = await waitFor(
        async () => {
          const s = await status(apis[1]!, headers, runId);
          return s === 'running' || s === 'queued' ? undefined : s;
        },
        60_000,
        { what: `run ${runId} to end after its lease` },
      );
      expect(final).toBe('failed');
      // The row is closed first, then the workflow fails.
      const handle = temporal.workflow.getHandle(runWorkflowId(org.organizationId, runId));
      await waitFor(async () => (await handle.describe()).status.name === 'FAILED', 10_000, {
        what: `run ${runId}'s workflow to be Failed`,
      });
    }
  });

  it('kill -9 of one API replica under load: no acked delivery is lost, and the other replica keeps answering', async () => {
    // 200 deliveries of one organization: within its 500 units a window, so none is shed.
    const payload = await pushWithNewOrg();
    const victim = state.api[0]!.pid;
    const acked: string[] = [];
    const survivorAnswers: number[] = [];
    let victimErrors = 0;
    let sent = 0;
    const total = 200;
    const sender = async () => {
      while (sent < total) {
        const i = sent++;
        if (i === 60) process.kill(victim, 'SIGKILL');
        const deliveryId = randomUUID();
        // Each delivery is another push (its own head): the same body under a new id would be a replay.
        const push = { ...payload, after: randomBytes(20).toString('hex') };
        try {
          const res = await deliver(apis[i % 2]!, { event: 'push', deliveryId, payload: push, secret: GITHUB_SECRET });
          if (res.status === 202) acked.push(deliveryId);
          if (i % 2 === 1) survivorAnswers.push(res.status);
        } catch {
          // Connection refused or reset by the killed replica: never acked, so GitHub would redeliver.
          if (i % 2 === 0) victimErrors++;
          else survivorAnswers.push(0);
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, sender));
    expect(alive(victim)).toBe(false);
    expect(victimErrors).toBeGreaterThan(0);
    expect(survivorAnswers).toHaveLength(total / 2);
    expect(survivorAnswers.every((s) => s === 202)).toBe(true);
    const missing: string[] = [];
    for (const deliveryId of acked) if (!(await workflowExists(githubDeliveryWorkflowId(deliveryId)))) missing.push(deliveryId);
    expect(missing).toEqual([]);
    expect(acked.length).toBeGreaterThanOrEqual(total / 2);
  });
});
