/**
 * /metrics carries what operators need, driven by real requests: the request histogram, ingress
 * outcomes, signature failures, heartbeats forwarded vs coalesced, Temporal client errors; and
 * the worker's SDK endpoint carries run status transitions, including automatic lease loss, the
 * GitHub reconcile's counts (its Schedule registered by the worker process at start), the
 * redeliveries it asked for and its pace (points spent on the App's routes, deliveries still
 * waiting), and GitHub's rate limits with the waits they set.
 */
import { randomUUID } from 'node:crypto';
import { githubReconcileScheduleId, type GithubReconcileSummary } from '../../src/github/contract';
import { getTarget, recordResync } from '../../src/github/target-records';
import { signalTarget } from '../../src/github/target-signal';
import { freshId, ownedTarget } from '../harness/github';
import { loadConfig } from '../../src/main/config';
import { startFakeGithub, type FakeGithub } from '../harness/fake-github';
import { createTestOrg } from '../harness/identity';
import { closedPort, freePort } from '../harness/ports';
import { spawnEntry, type Spawned } from '../harness/process';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const metricValue = (text: string, name: string, labels: Record<string, string>) => {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return line ? Number(line.split(' ').pop()) : undefined;
};

describe('API metrics', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { GITHUB_WEBHOOK_SECRET: 'metrics-secret' } });
  });
  afterAll(() => stack.stop());

  it('count signature failures, rejections, heartbeats and request latency by route', async () => {
    const bad = await stack.request('POST', '/v1/webhooks/connectors/github', {
      headers: { 'x-github-event': 'push', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` },
      raw: '{}',
    });
    expect(bad.status).toBe(401);

    const org = await createTestOrg(stack.services.database.db);
    const runId = `metrics-${randomUUID()}`;
    for (let i = 0; i < 5; i++) {
      const res = await stack.request('POST', `/v1/automation-runs/${runId}/heartbeat`, {
        headers: org.owner.headers,
        body: { attempt: 1 },
      });
      expect(res.status).toBe(200);
    }

    const text = (await stack.request('GET', '/metrics')).text;
    expect(metricValue(text, 'den_signature_failures_total', { route: '/v1/webhooks/connectors/github', reason: 'mismatch' })).toBe(1);
    expect(
      metricValue(text, 'den_ingress_outcomes_total', {
        route: '/v1/webhooks/connectors/github',
        outcome: 'rejected',
        reason: 'invalid_signature',
      }),
    ).toBe(1);
    expect(metricValue(text, 'den_run_heartbeats_total', { result: 'forwarded' })).toBe(1);
    expect(metricValue(text, 'den_run_heartbeats_total', { result: 'coalesced' })).toBe(4);
    expect(
      metricValue(text, 'den_http_request_duration_seconds_count', {
        route: '/v1/automation-runs/{id}/heartbeat',
        method: 'POST',
        status: '200',
      }),
    ).toBe(5);
    expect(text).toContain('process_resident_memory_bytes');
  });

  it('count Temporal client errors (each one a 503)', async () => {
    const down = await startTestStack({ env: { TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`, TEMPORAL_START_TIMEOUT: '500ms' } });
    try {
      const org = await createTestOrg(down.services.database.db);
      const res = await down.request('POST', `/v1/automation-runs/down-${randomUUID()}/heartbeat`, {
        headers: org.owner.headers,
        body: { attempt: 1 },
      });
      expect(res.status).toBe(503);
      const text = (await down.request('GET', '/metrics')).text;
      // A heartbeat with no row first asks the run who owns it; that query is the call that fails.
      expect(metricValue(text, 'den_temporal_client_errors_total', { operation: 'query' })).toBeGreaterThanOrEqual(1);
    } finally {
      await down.stop();
    }
  });
});

describe('worker metrics (SDK Prometheus endpoint)', () => {
  let worker: Spawned;
  let stack: TestStack;
  let metricsUrl: string;
  let github: FakeGithub;
  const taskQueue = `metrics-${randomUUID()}`;
  const runEnv = { RUN_LEASE_TIMEOUT: '1s', RUN_MAX_ATTEMPTS: '1', TEMPORAL_TASK_QUEUE: taskQueue };

  beforeAll(async () => {
    const base = loadConfig();
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
    github = await startFakeGithub();
    worker = spawnEntry('src/bin/worker.ts', {
      DATABASE_URL: base.database.url,
      TEMPORAL_ADDRESS: base.temporal.address,
      WORKFLOW_BUNDLE_PATH: base.temporal.workflowBundlePath,
      SECRET_KEY: base.secretKey,
      DATA_DIR: base.dataDir,
      WORKER_METRICS_PORT: String(port),
      LOG_LEVEL: 'warn',
      GITHUB_APP_ID: github.appId,
      GITHUB_APP_PRIVATE_KEY: github.privateKey,
      GITHUB_API_BASE_URL: github.url,
      ...runEnv,
    });
    stack = await startTestStack({ env: runEnv });
    await waitFor(async () => (await fetch(metricsUrl)).ok, 30_000, { what: 'the worker metrics endpoint', intervalMs: 200 });
  }, 60_000);
  afterAll(async () => {
    await stack.stop();
    worker.child.kill('SIGTERM');
    await worker.exited;
    await github.close();
  });

  it('exports run status transitions, including automatic lease loss', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const runId = `lease-${randomUUID()}`;
    const res = await stack.request('POST', `/v1/automation-runs/${runId}/heartbeat`, { headers: org.owner.headers, body: { attempt: 1 } });
    expect(res.status).toBe(200);
    // No more heartbeats: the 1 s lease expires and, with no attempts left, the run fails.
    const text = await waitFor(
      async () => {
        const body = await (await fetch(metricsUrl)).text();
        return /^den_run_status_transitions_total\{[^}]*to="failed"/m.test(body) ? body : undefined;
      },
      30_000,
      { what: 'a failed transition in the worker metrics', intervalMs: 250 },
    );
    const line = text.split('\n').find((l) => l.startsWith('den_run_status_transitions_total{') && l.includes('to="failed"'))!;
    expect(line).toContain('cause="lease_lost"');
    expect(line).toContain('from="running"');
    // The SDK's own worker metrics are on the same endpoint.
    expect(text).toMatch(/temporal_\w+/);
  }, 60_000);

  it('registers the GitHub reconcile Schedule at start and exports its counts', async () => {
    // A delivery GitHub failed to hand over: the reconcile sees it and asks for it again.
    github.logDelivery({ event: 'push', guid: randomUUID(), raw: '{}', signature: 'sha256=00' }, 503);
    const schedule = stack.services.temporal.client.schedule.getHandle(githubReconcileScheduleId(taskQueue));
    try {
      // The worker creates it right after its pollers start, which may be just after its metrics endpoint.
      const described = await waitFor(() => schedule.describe(), 15_000, { what: 'the reconcile Schedule', intervalMs: 200 });
      expect(described.action).toMatchObject({ type: 'startWorkflow', workflowType: 'githubReconcile' });
      await schedule.trigger();
      const started = await waitFor(async () => (await schedule.describe()).info.recentActions[0]?.action.workflow, 10_000, {
        what: 'the schedule’s first action',
      });
      const summary = (await stack.services.temporal.client.workflow.getHandle(started.workflowId).result()) as GithubReconcileSummary;
      expect(summary.redeliveriesAsked).toBeGreaterThanOrEqual(1);
      const text = await waitFor(
        async () => {
          const body = await (await fetch(metricsUrl)).text();
          return /^den_github_reconcile_total\{[^}]*item="redeliveries_asked"/m.test(body) && /^den_github_app_points_total[{ ]/m.test(body)
            ? body
            : undefined;
        },
        30_000,
        { what: 'the reconcile counts in the worker metrics', intervalMs: 250 },
      );
      const line = text.split('\n').find((l) => l.startsWith('den_github_reconcile_total{') && l.includes('item="redeliveries_asked"'))!;
      expect(Number(line.split(' ').pop())).toBeGreaterThanOrEqual(1);
      expect(github.redeliveryRequests.length).toBeGreaterThanOrEqual(1);
      expect(metricValue(text, 'den_github_redeliveries_total', { outcome: 'asked' })).toBeGreaterThanOrEqual(1);
      // Its pace: the points it spent on the App's routes (a page of the log, 1, and the redelivery's POST, 5, at least), and the GUIDs still owed an ask.
      expect(metricValue(text, 'den_github_app_points_total', {})).toBeGreaterThanOrEqual(6);
      expect(metricValue(text, 'den_github_redeliveries_waiting', {})).toBeGreaterThanOrEqual(0);
    } finally {
      await schedule.delete();
    }
  }, 60_000);

  it('exports the GitHub rate limits a sync met and the seconds of wait they set', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const n = freshId();
    const installationId = freshId();
    const repository = `octo-${n}/limited-${n}`;
    github.commit(repository, installationId, 'master', { '.mcp.json': '{}' });
    const targetId = await ownedTarget(stack.services.database.db, {
      organizationId: org.organizationId,
      installationId,
      repositoryFullName: repository,
      repositoryId: n,
      ref: 'master',
    });
    github.secondaryRateLimit(installationId, { retryAfterSeconds: 2 });
    const target = (await getTarget(stack.services.database.db, targetId))!;
    const eventId = await recordResync(stack.services.database.db, { target, reason: 'manual' });
    await signalTarget(stack.ingress, { target, signal: { eventId, full: true }, idleMs: 60_000, admission: 'bypass' });
    await waitFor(
      async () =>
        (await stack.services.database.db.selectFrom('github_sync_events').select('status').where('id', '=', eventId).executeTakeFirst())
          ?.status === 'completed',
      30_000,
      { what: 'the sync after its wait' },
    );
    const text = await waitFor(
      async () => {
        const body = await (await fetch(metricsUrl)).text();
        return /^den_github_rate_limits_total\{[^}]*limit="secondary"/m.test(body) ? body : undefined;
      },
      30_000,
      { what: 'the rate limit in the worker metrics', intervalMs: 250 },
    );
    expect(metricValue(text, 'den_github_rate_limits_total', { limit: 'secondary' })).toBeGreaterThanOrEqual(1);
    expect(metricValue(text, 'den_github_rate_limit_wait_seconds_total', { limit: 'secondary' })).toBeGreaterThanOrEqual(2);
  }, 60_000);
});
