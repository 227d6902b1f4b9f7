/**
 * `npm run bench [-- --duration 30 --connections 16 --only slack-events,github-push] [--cluster] [--env NAME=VALUE …]`
 * `npm run bench -- heartbeats --runs N --interval S --ramp R --duration T [--lease L --fraction F --capacity C] [--credential runner-token|api-key] [--env NAME=VALUE …] [--cluster]`
 * `npm run bench -- histories`: history events, workflow tasks and activities per recorded item
 * `npm run bench -- unauthenticated`: the API's memory under unsigned 25 MB uploads (bench/unauthenticated-memory.ts)
 * `npm run bench -- fairness [--duration 20 --connections 32 --interval 250] [--cluster] [--mechanism on|off|both] [--env NAME=VALUE …] [--server-config key=value …]`:
 *   two tenants (bench/fairness.ts)
 * `npm run bench -- admission [--duration 15 --connections 16 --flood-connections 32]`: admission as a user meets it,
 *   in one run (bench/admission.ts)
 * `npm run bench -- slack-irrelevant [--rate 2000 --duration 60]`: channel messages that are not for the bot, acked
 *   without a workflow (bench/slack-irrelevant.ts)
 *
 * Drives the real API process (a separate `serve`, with a separate `worker`) — or with `--cluster`
 * the production topology of `npm run cluster`, the load spread over its API replicas — with signed,
 * unique requests, side by side with (a) the ceiling — the same number of workflow starts
 * straight through the Temporal client — and (b) the same route with the enqueue switched off.
 * After each scenario every acked request is checked for durability: acked-but-missing must be 0.
 * Results go to bench/results/<date>.json and .md. Exits non-zero if anything acked was lost.
 */
import { ping } from '../workflows/ping';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { signGithubPayload } from '../src/github/signature';
import { createSlackConnection } from '../src/slack/connections';
import { signSlackRequest } from '../src/slack/signature';
import { githubDeliveryWorkflowId } from '../src/github/contract';
import { runWorkflowId } from '../src/runs/contract';
import { slackEventWorkflowId } from '../src/slack/contract';
import { createTestOrg } from '../test/harness/identity';
import { ownedTarget } from '../test/harness/github';
import { findMissing, runClosedLoop, runLoad, type GeneratedRequest, type LoadResult, type RequestSource } from './lib/load';
import { waitFor } from '../test/harness/wait';
import { asLoadStack, BENCH_TASK_QUEUE, startBenchStack, type LoadStack } from './lib/stack';
import { startClusterLoadStack } from './lib/cluster-stack';
import { measureCpu } from './lib/cpu';
import { percentile } from './lib/percentile';
import { printHistoryCosts } from './history-cost';
import { unauthenticatedMemory } from './unauthenticated-memory';
import { fairnessBench } from './fairness';
import { envOptions } from './lib/env-options';
import { historyEventMs } from './lib/history-time';
import { exitWith } from './lib/exit';

interface ScenarioResult {
  scenario: string;
  rps: number;
  latencyMs: { p50: number; p99: number; max: number };
  requests: number;
  non2xx: number;
  statuses: Record<string, number>;
  apiRssMiB: number;
  acked: number;
  ackedButMissing: number;
  ceilingRps: number;
  noEnqueueRps?: number;
  ratioToCeiling: number;
  ratioToNoEnqueue?: number;
  /** Acked *and* processed per second, over load time plus drain time. */
  sustainedRps?: number;
  drainSeconds?: number;
  workerRssMiB?: number;
  /** Share of one core of each part during the load, in percent (`bench` is the load generator). */
  cpuPercent: Record<string, number>;
}

export interface Fixtures {
  apiKey: string;
  organizationId: string;
  slack: { connectionId: string; secret: string; teamId: string; appId: string };
  pushTemplate: Record<string, unknown>;
}

interface Scenario {
  name: string;
  /** Generates the next request; `context` lives per connection. */
  next: (fixtures: Fixtures) => RequestSource;
  /** Whether the no-enqueue comparison applies (routes whose ack is an enqueue). */
  compareNoEnqueue: boolean;
  durable?: (stack: LoadStack, fixtures: Fixtures, acked: string[]) => Promise<string[]>;
  /** How many items the worker has finished (workflow closed or at its resting state, effects in Postgres). */
  processed?: (stack: LoadStack, fixtures: Fixtures) => Promise<number>;
}

export const visibleCount = async (stack: LoadStack, query: string) => (await stack.temporal.client.workflow.count(query)).count;

export const exists = (stack: LoadStack) => async (workflowId: string) => {
  await stack.temporal.client.workflow.getHandle(workflowId).describe();
  return true;
};

/** The next event of `run`; the request's id is `<run id>/<sequence>`, the key of its row. */
function runEventRequest(f: Fixtures, run: { id: string; sequence: number }): GeneratedRequest {
  run.sequence += 1;
  return {
    id: `${run.id}/${run.sequence}`,
    method: 'POST',
    path: `/v1/automation-runs/${run.id}/events`,
    headers: { 'content-type': 'application/json', 'x-api-key': f.apiKey },
    body: JSON.stringify({ attempt: 1, sequence: run.sequence, type: 'assistant', payload: { text: 'hi' }, createdAt: Date.now() }),
  };
}

/**
 * Events for `count` live runs, each run's sequence counting up; an event refused (429, 503) is
 * sent again, as a runtime does, since its run holds every later one until it comes.
 */
function liveRunEvents(f: Fixtures, count: number): RequestSource {
  const runs = Array.from({ length: count }, () => ({ id: `bench-${randomUUID()}`, sequence: 0 }));
  const refused: string[] = [];
  let i = 0;
  const again = (id: string): GeneratedRequest => {
    const [runId, sequence] = id.split('/');
    return runEventRequest(f, { id: runId!, sequence: Number(sequence) - 1 });
  };
  const next = () => (refused.length > 0 ? again(refused.shift()!) : runEventRequest(f, runs[i++ % runs.length]!));
  return Object.assign(next, {
    answered: (id: string, status: number) => {
      if (status === 429 || status === 503) refused.push(id);
    },
  });
}

async function runEventsPersisted(stack: LoadStack, f: Fixtures): Promise<number> {
  const row = await sql<{
    n: string;
  }>`SELECT count(*) AS n FROM automation_run_events WHERE organization_id = ${f.organizationId} AND run_id LIKE 'bench-%'`.execute(
    stack.database.db,
  );
  return Number(row.rows[0]?.n ?? 0);
}

/**
 * An acked event was decided by its run before the ack; durable means its row reaches Postgres.
 * Waits up to 2 minutes for the worker, then names the events without a row.
 */
async function runEventsStored(stack: LoadStack, f: Fixtures, acked: string[]): Promise<string[]> {
  const stored = async (id: string) => {
    const [runId, sequence] = id.split('/');
    const row =
      await sql`SELECT 1 FROM automation_run_events WHERE organization_id = ${f.organizationId} AND run_id = ${runId} AND attempt = 1 AND sequence = ${Number(sequence)}`.execute(
        stack.database.db,
      );
    return row.rows.length === 1;
  };
  let missing = acked;
  await waitFor(async () => (missing = await findMissing(missing, stored)).length === 0, 120_000, { intervalMs: 1000 }).catch(
    () => undefined,
  );
  return missing;
}

export const SCENARIOS: Scenario[] = [
  {
    name: 'slack-events',
    compareNoEnqueue: true,
    next: (f) => () => {
      const eventId = `Ev${randomUUID().replace(/-/g, '')}`;
      const body = JSON.stringify({
        type: 'event_callback',
        token: 'unused',
        team_id: f.slack.teamId,
        api_app_id: f.slack.appId,
        event_id: eventId,
        event_time: Math.floor(Date.now() / 1000),
        event: { type: 'app_mention', user: 'UBENCH0001', channel: 'CBENCH0001', ts: `${Date.now() / 1000}`, text: '<@UBOT> hello' },
      });
      const timestamp = Math.floor(Date.now() / 1000);
      return {
        id: eventId,
        method: 'POST',
        path: `/v1/integrations/slack/${f.slack.connectionId}/events`,
        headers: {
          'content-type': 'application/json',
          'x-slack-request-timestamp': String(timestamp),
          'x-slack-signature': signSlackRequest(f.slack.secret, timestamp, body),
        },
        body,
      };
    },
    durable: (stack, f, acked) => findMissing(acked, (id) => exists(stack)(slackEventWorkflowId(f.slack.connectionId, id))),
    // The bench's Slack user is not linked: an invocation is processed once it waits for the link
    // (its prompt was attempted), which is as far as the worker can take it alone.
    processed: (stack) => visibleCount(stack, `WorkflowType = 'slackEvent' AND SlackEventStatus = 'awaiting_link'`),
  },
  {
    name: 'github-push',
    compareNoEnqueue: true,
    next: (f) => () => {
      const deliveryId = randomUUID();
      const body = JSON.stringify({ ...f.pushTemplate, after: randomUUID().replace(/-/g, '').padEnd(40, '0') });
      return {
        id: deliveryId,
        method: 'POST',
        path: '/v1/webhooks/connectors/github',
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'push',
          'x-github-delivery': deliveryId,
          'x-hub-signature-256': signGithubPayload(benchSecrets.github, body),
        },
        body,
      };
    },
    durable: (stack, _f, acked) => findMissing(acked, (id) => exists(stack)(githubDeliveryWorkflowId(id))),
    // A delivery workflow completes only after its effect is in Postgres.
    processed: (stack) => visibleCount(stack, `WorkflowType = 'githubDelivery' AND ExecutionStatus = 'Completed'`),
  },
  {
    name: 'run-events',
    compareNoEnqueue: true,
    // Events for 16 live runs, each run's sequence counting up. A run decides
    // each event before the ack (an Update), so neighbours in one run may arrive out of order and
    // wait in its buffer.
    next: (f) => liveRunEvents(f, 16),
    durable: runEventsStored,
    processed: runEventsPersisted,
  },
  {
    name: 'run-events-new-runs',
    compareNoEnqueue: true,
    // One new run per request: every request is a workflow start, like the ceiling.
    next: (f) => () => runEventRequest(f, { id: `bench-${randomUUID()}`, sequence: 0 }),
    durable: runEventsStored,
    processed: runEventsPersisted,
  },
  {
    name: 'run-heartbeats',
    compareNoEnqueue: true,
    // A fixed pool of runs, heartbeated over and over: most heartbeats coalesce in the API.
    next: (f) => {
      const runs = Array.from({ length: 64 }, () => `bench-hb-${randomUUID()}`);
      let i = 0;
      return () => {
        const runId = runs[i++ % runs.length]!;
        return {
          id: runId,
          method: 'POST',
          path: `/v1/automation-runs/${runId}/heartbeat`,
          headers: { 'content-type': 'application/json', 'x-api-key': f.apiKey },
          body: JSON.stringify({ attempt: 1 }),
        };
      };
    },
    durable: (stack, f, acked) => findMissing([...new Set(acked)], (id) => exists(stack)(runWorkflowId(f.organizationId, id))),
  },
  {
    name: 'resolve-preset',
    compareNoEnqueue: false,
    // A preset query probes only the preset's URL; MCP_DNS=off keeps that probe on this machine.
    next: (f) => () => ({
      id: randomUUID(),
      method: 'POST',
      path: '/v1/mcp-connections/resolve',
      headers: { 'content-type': 'application/json', 'x-api-key': f.apiKey },
      body: JSON.stringify({ query: 'notion' }),
    }),
  },
];

export const benchSecrets = { github: '' };

/** The embedded stack, or with `--cluster` the production topology; `env` reaches every API and worker. */
async function startLoadStack(
  cluster: boolean | undefined,
  env: Record<string, string>,
  options: { withNoEnqueueApi?: boolean } = {},
): Promise<LoadStack> {
  // The cluster's launcher passes its environment on to every replica and worker.
  const stack = cluster
    ? await startClusterLoadStack({ env })
    : asLoadStack(await startBenchStack({ ...options, apiEnv: env, workerEnv: env }));
  // Ctrl-C stops what the bench started before it exits.
  process.once('SIGINT', () => void stack.stop().finally(() => process.exit(130)));
  return stack;
}

export async function ceiling(stack: LoadStack, connections: number, durationSeconds: number) {
  // Workflow starts on a queue no worker polls: the cost of making work durable, nothing else.
  return runClosedLoop({
    concurrency: connections,
    durationSeconds,
    fn: async () => {
      await stack.temporal.client.workflow.start(ping, { taskQueue: 'bench-ceiling', workflowId: `ceiling/${randomUUID()}`, args: ['x'] });
    },
  });
}

/**
 * Waits until the worker has drained what the previous phase queued (a probe workflow round
 * trip is quick again), so every phase is measured on the same, idle machine. Without it the
 * dev server's single SQLite connection is still busy with the last phase's workflows.
 */
export async function settle(stack: LoadStack): Promise<void> {
  await waitFor(
    async () => {
      const started = Date.now();
      await stack.temporal.client.workflow.execute(ping, {
        taskQueue: BENCH_TASK_QUEUE,
        workflowId: `ping/settle-${randomUUID()}`,
        args: ['settle'],
        workflowExecutionTimeout: '30s',
      });
      return Date.now() - started < 250;
    },
    180_000,
    { what: 'the worker to drain its backlog', intervalMs: 1000 },
  ).catch(() => process.stderr.write('  (worker still busy after 3 min; measuring anyway)\n'));
}

/**
 * After the load stops: how long the worker takes to finish what was acked. The count is
 * cumulative, so it is taken from the baseline counted before the load; bounded at 3 minutes.
 */
export async function drainAfterLoad(
  baseline: number,
  count: () => Promise<number>,
  acked: number,
): Promise<{ processed: number; seconds: number }> {
  const started = Date.now();
  let processed = 0;
  while (Date.now() - started < 180_000) {
    processed = (await count()) - baseline;
    if (processed >= acked) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return { processed: Math.min(processed, acked), seconds: (Date.now() - started) / 1000 };
}

async function processRssMiB(pid: number): Promise<number | undefined> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  return kb === undefined ? undefined : Math.round(Number(kb) / 1024);
}

async function largestRssMiB(pids: number[]): Promise<number | undefined> {
  const values = (await Promise.all(pids.map(processRssMiB))).filter((v): v is number => v !== undefined);
  return values.length ? Math.max(...values) : undefined;
}

/** NaN when the API does not answer (it is printed so, rather than failing the whole bench). */
async function rssMiB(url: string): Promise<number> {
  const text = await fetch(`${url}/metrics`)
    .then((res) => res.text())
    .catch(() => '');
  if (!text) return NaN;
  const line = text.split('\n').find((l) => l.startsWith('process_resident_memory_bytes '));
  return Math.round(Number(line?.split(' ')[1] ?? 0) / 2 ** 20);
}

export async function fixtures(stack: LoadStack): Promise<Fixtures> {
  const org = await createTestOrg(stack.database.db, 'bench');
  const secret = randomUUID();
  const key = Buffer.from(stack.secretKey, 'hex');
  const connection = await createSlackConnection(
    { db: stack.database.db, secretKey: key },
    {
      organizationId: org.organizationId,
      teamId: 'TBENCH0001',
      apiAppId: 'ABENCH0001',
      signingSecret: secret,
      // With a bot token the connect prompt is posted (to the bench's Slack, on loopback), as in production.
      botToken: stack.slack.issueToken({ token: 'xoxb-bench', teamId: 'TBENCH0001', appId: 'ABENCH0001' }),
    },
  );
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const examples = require('@octokit/webhooks-examples/api.github.com/index.json') as {
    name: string;
    examples: Record<string, unknown>[];
  }[];
  const push = examples
    .find((e) => e.name === 'push')!
    .examples.find((p) => (p as { installation?: unknown }).installation && (p as { ref?: unknown }).ref === 'refs/heads/master')!;
  // The pushes' repository has a target: a push no target takes is answered 200 and not queued.
  const { installation, repository } = push as { installation: { id: number }; repository: { id: number; full_name: string } };
  await ownedTarget(stack.database.db, {
    organizationId: org.organizationId,
    installationId: installation.id,
    repositoryFullName: repository.full_name,
    repositoryId: repository.id,
  });
  return {
    apiKey: org.owner.apiKey,
    organizationId: org.organizationId,
    slack: { connectionId: connection.connectionId, secret, teamId: 'TBENCH0001', appId: 'ABENCH0001' },
    pushTemplate: push,
  };
}

/** Each part's share of one core during the load (the machine has os.cpus().length of them). */
function cpuTable(results: ScenarioResult[]): string {
  const parts = Object.keys(results[0]?.cpuPercent ?? {});
  return [
    `| scenario | ${parts.map((p) => `${p} %`).join(' | ')} | total % of ${os.cpus().length * 100} |`,
    `|---|${parts.map(() => '---|').join('')}---|`,
    ...results.map(
      (r) =>
        `| ${r.scenario} | ${parts.map((p) => r.cpuPercent[p]).join(' | ')} | ${Object.values(r.cpuPercent).reduce((a, b) => a + b, 0)} |`,
    ),
  ].join('\n');
}

function table(results: ScenarioResult[]): string {
  const rows = results.map((r) =>
    [
      r.scenario,
      r.rps.toFixed(0),
      r.sustainedRps === undefined ? '—' : `${r.sustainedRps.toFixed(0)} (${r.drainSeconds!.toFixed(1)} s)`,
      `${r.latencyMs.p50} / ${r.latencyMs.p99} / ${r.latencyMs.max}`,
      String(r.non2xx),
      `${r.apiRssMiB} / ${r.workerRssMiB ?? '—'}`,
      r.ceilingRps.toFixed(0),
      r.ratioToCeiling.toFixed(2),
      r.noEnqueueRps === undefined ? '—' : r.noEnqueueRps.toFixed(0),
      r.ratioToNoEnqueue === undefined ? '—' : r.ratioToNoEnqueue.toFixed(2),
      `${r.acked} / ${r.ackedButMissing}`,
    ].join(' | '),
  );
  return [
    '| scenario | ingest req/s | sustained req/s (drain) | p50 / p99 / max ms | non-2xx | API / worker RSS MiB | ceiling (a) req/s | ingest ÷ (a) | no-enqueue (b) req/s | ingest ÷ (b) | acked / acked-but-missing |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r} |`),
  ].join('\n');
}

async function loadScenarios(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '30' },
      connections: { type: 'string', default: '16' },
      only: { type: 'string' },
      cluster: { type: 'boolean', default: false },
      // NAME=VALUE for the API and worker processes, e.g. --env WORKER_WORKFLOW_TASK_SLOTS=10.
      env: { type: 'string', multiple: true, default: [] },
    },
  });
  const duration = Number(values.duration);
  const connections = Number(values.connections);
  const only = values.only?.split(',');
  const chosen = SCENARIOS.filter((s) => !only || only.includes(s.name));
  const apiEnv = {
    // The bench measures the front door, not the product's quotas.
    SLACK_WORKSPACE_QUOTA_PER_MINUTE: '100000000',
    SLACK_USER_QUOTA_PER_MINUTE: '100000000',
    MCP_DNS: 'off',
    // Runs created by the load must not hit their lease during later phases of the bench.
    RUN_LEASE_TIMEOUT: '1h',
    RUN_MAX_DURATION: '2h',
    ...envOptions(values.env),
  };
  const stack = await startLoadStack(values.cluster, apiEnv, { withNoEnqueueApi: true });
  benchSecrets.github = stack.githubSecret;
  const results: ScenarioResult[] = [];
  try {
    const f = await fixtures(stack);
    for (const scenario of chosen) {
      process.stderr.write(`${scenario.name}: ${connections} connections × ${duration} s\n`);
      await settle(stack);
      const processed = scenario.processed ? () => scenario.processed!(stack, f) : undefined;
      const baseline = processed ? await processed() : 0;
      const cpu = await measureCpu({ ...stack.processes, bench: [] });
      const benchCpuBefore = process.cpuUsage();
      const route: LoadResult = await runLoad({ url: stack.apiUrls, connections, durationSeconds: duration, next: scenario.next(f) });
      const benchCpu = process.cpuUsage(benchCpuBefore);
      const cpuPercent = { ...(await cpu()), bench: Math.round((benchCpu.user + benchCpu.system) / 1e4 / duration) };
      const drain = processed ? await drainAfterLoad(baseline, processed, route.acked.length) : undefined;
      const rss = Math.max(...(await Promise.all(stack.apiUrls.map(rssMiB))));
      const workerRss = await largestRssMiB(stack.workerPids);
      await settle(stack);
      const a = await ceiling(stack, connections, duration);
      await settle(stack);
      const b =
        scenario.compareNoEnqueue && stack.apiNoEnqueueUrl
          ? await runLoad({ url: stack.apiNoEnqueueUrl, connections, durationSeconds: duration, next: scenario.next(f) })
          : undefined;
      const missing = scenario.durable ? await scenario.durable(stack, f, route.acked) : [];
      results.push({
        scenario: scenario.name,
        rps: route.rps,
        latencyMs: route.latency,
        requests: route.requests,
        non2xx: route.non2xx,
        statuses: route.statuses,
        apiRssMiB: rss,
        acked: route.acked.length,
        ackedButMissing: missing.length,
        ceilingRps: a.rps,
        noEnqueueRps: b?.rps,
        ratioToCeiling: route.rps / a.rps,
        ratioToNoEnqueue: b ? route.rps / b.rps : undefined,
        ...(drain ? { sustainedRps: drain.processed / (duration + drain.seconds), drainSeconds: drain.seconds } : {}),
        workerRssMiB: workerRss,
        cpuPercent,
      });
      process.stderr.write(`  ${route.rps.toFixed(0)} req/s, acked ${route.acked.length}, acked-but-missing ${missing.length}\n`);
    }
  } finally {
    await stack.stop();
  }

  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  const topology = values.cluster ? 'cluster' : 'embedded';
  const settings = values.env.length ? ` Settings: ${values.env.join(', ')}.` : '';
  const markdown = `Machine: ${machine}. Topology: ${stack.description}.${settings} ${connections} connections${stack.apiUrls.length > 1 ? ` spread over ${stack.apiUrls.length} replicas` : ''}, ${duration} s per run. RSS: the largest API and worker process.\n\n${table(results)}\n\nCPU during the load, in % of one core (each part with its child processes; bench is the load generator):\n\n${cpuTable(results)}\n`;
  console.log(`\n${markdown}`);
  await writeResults(
    { kind: 'load', topology, env: values.env, machine, description: stack.description, connections, duration, results },
    markdown,
  );
  return results.every((r) => r.ackedButMissing === 0) ? 0 : 1;
}

async function writeResults(json: object, markdown: string): Promise<void> {
  const dir = path.join(__dirname, 'results');
  await fs.mkdir(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  await fs.writeFile(path.join(dir, `${stamp}.json`), `${JSON.stringify(json, null, 2)}\n`);
  await fs.writeFile(path.join(dir, `${stamp}.md`), markdown);
}

/** `p`-th percentile of `values`, rounded to the millisecond. */
const percentileOf = (values: number[], p: number) => Math.round(percentile(values, p));

/** What one simulated runtime saw: whether its run was admitted, and its answers. */
interface RuntimeSeen {
  admitted: boolean;
  /** 429 `capacity` answers before admission (or for good). */
  refused: number;
  /** Refusals that named no Retry-After: each is a defect. */
  refusedBadly: number;
}

/** One heartbeat as a runtime sends it: the answer's status ('no answer' when none came within the interval), reason, Retry-After and time. */
async function sendHeartbeat(
  url: string,
  credential: Record<string, string>,
  id: string,
  timeoutMs: number,
): Promise<{ status: string; reason?: string; retryAfterS: number; tookMs: number }> {
  const sentAt = Date.now();
  const res = await fetch(`${url}/v1/automation-runs/${id}/heartbeat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...credential },
    body: JSON.stringify({ attempt: 1 }),
    signal: AbortSignal.timeout(timeoutMs),
  }).catch(() => undefined);
  const body = (await res?.json().catch(() => undefined)) as { reason?: string } | undefined;
  return {
    status: res ? String(res.status) : 'no answer',
    ...(body?.reason ? { reason: body.reason } : {}),
    retryAfterS: Number(res?.headers.get('retry-after') ?? 0),
    tookMs: Date.now() - sentAt,
  };
}

/** One runner token per runtime, minted with the API key (16 at a time), as `den runtime` mints its own. */
async function mintRunnerTokens(url: string, apiKey: string, count: number): Promise<Record<string, string>[]> {
  const tokens: Record<string, string>[] = new Array(count);
  let next = 0;
  const mint = async () => {
    for (let index = next++; index < count; index = next++) {
      const res = await fetch(`${url}/v1/automation-runners/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
        body: JSON.stringify({ label: `bench-${index}` }),
      });
      if (res.status !== 201) throw new Error(`minting a runner token: ${res.status} ${await res.text()}`);
      tokens[index] = { authorization: `Bearer ${((await res.json()) as { token: string }).token}` };
    }
  };
  await Promise.all(Array.from({ length: 16 }, mint));
  return tokens;
}

/**
 * N runtimes heartbeating every S seconds, started evenly over the ramp, then held for T
 * seconds, against the live-run capacity (RUN_CAPACITY). Each runtime sends its own runner token
 * (`--credential runner-token`, the default) or all share the API key (`api-key`). A runtime whose first heartbeat is
 * refused (429 `capacity`) asks again after the Retry-After it was given, as `den runtime` does.
 * Reports the admitted runs, the refused ones, the admitted runs' non-200 answers and heartbeat
 * ack p99, the coalescing ratio, false lease losses (admitted runs not running at the end) and
 * memory.
 */
async function heartbeats(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      runs: { type: 'string', default: '200' },
      interval: { type: 'string', default: '10' },
      ramp: { type: 'string', default: '10' },
      duration: { type: 'string', default: '60' },
      lease: { type: 'string', default: '60' },
      // Unset: the service's default (RUN_HEARTBEAT_COALESCE_FRACTION).
      fraction: { type: 'string' },
      // Unset: the service's default (RUN_CAPACITY).
      capacity: { type: 'string' },
      cluster: { type: 'boolean', default: false },
      // Each runtime's own runner token, minted with the API key as `den runtime` does (default),
      // or one API key for every runtime: then they are one sender to the refusal hold, which
      // holds each refusal of one that comes back while another's Retry-After runs.
      credential: { type: 'string', default: 'runner-token' },
      // Any other setting of the API and worker, for tuning: NAME=VALUE, repeatable.
      env: { type: 'string', multiple: true, default: [] },
    },
  });
  if (values.credential !== 'runner-token' && values.credential !== 'api-key') throw new Error('--credential is runner-token or api-key');
  const runs = Number(values.runs);
  const intervalMs = Number(values.interval) * 1000;
  const rampMs = Number(values.ramp) * 1000;
  const durationMs = Number(values.duration) * 1000;
  const env: Record<string, string> = {
    RUN_LEASE_TIMEOUT: `${values.lease}s`,
    ...(values.fraction === undefined ? {} : { RUN_HEARTBEAT_COALESCE_FRACTION: values.fraction }),
    ...(values.capacity === undefined ? {} : { RUN_CAPACITY: values.capacity }),
    ...envOptions(values.env),
  };
  const stack = await startLoadStack(values.cluster, env);
  // Each request to the next replica, as a round-robin load balancer would: the worst case for
  // coalescing, which each replica does on its own.
  let nextReplica = 0;
  const api = () => stack.apiUrls[nextReplica++ % stack.apiUrls.length]!;
  try {
    const org = await createTestOrg(stack.database.db, 'bench-heartbeats');
    const ids = Array.from({ length: runs }, () => `hb-${randomUUID()}`);
    const credentials =
      values.credential === 'api-key'
        ? ids.map(() => ({ 'x-api-key': org.owner.apiKey }))
        : await mintRunnerTokens(stack.apiUrls[0]!, org.owner.apiKey, runs);
    const seen = new Map<string, RuntimeSeen>(ids.map((id) => [id, { admitted: false, refused: 0, refusedBadly: 0 }]));
    let sent = 0;
    let failed = 0;
    let failedAfterRamp = 0;
    const statuses: Record<string, number> = {};
    /** The admitted runs' heartbeat answers, by status, and the time each 200 took. */
    const admittedStatuses: Record<string, number> = {};
    const ackMs: number[] = [];
    const startedAt = Date.now();
    const rampEnd = startedAt + rampMs;
    const deadline = rampEnd + durationMs;
    // The runtimes keep heartbeating until the lookups below are done: a lease is judged while it
    // is being kept. (Judged after the heartbeats stop, a run whose last forwarded heartbeat was a
    // window earlier can run out of lease during a slow final check, which is no false loss.)
    let stopped = false;
    const refusedFor: Record<string, number> = {};
    const loops = Promise.all(
      ids.map(async (id, index) => {
        const runtime = seen.get(id)!;
        /** Counts one answer of this runtime; true when it refused a run not admitted yet. */
        const count = (answer: Awaited<ReturnType<typeof sendHeartbeat>>, sentAt: number): boolean => {
          const refusal = answer.status === '429' && !runtime.admitted;
          if (sentAt >= deadline) return refusal;
          sent += 1;
          statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
          if (refusal) {
            runtime.refused += 1;
            refusedFor[answer.reason ?? 'none'] = (refusedFor[answer.reason ?? 'none'] ?? 0) + 1;
            if (!(answer.retryAfterS >= 1)) runtime.refusedBadly += 1;
          } else if (runtime.admitted || answer.status === '200') {
            admittedStatuses[answer.status] = (admittedStatuses[answer.status] ?? 0) + 1;
            if (answer.status === '200') ackMs.push(answer.tookMs);
            else {
              failed += 1;
              if (sentAt >= rampEnd) failedAfterRamp += 1;
            }
          }
          return refusal;
        };
        // Spread the runs over the ramp, as independent runtimes would start.
        await new Promise((r) => setTimeout(r, (index / runs) * rampMs));
        while (!stopped) {
          const sentAt = Date.now();
          let answer = await sendHeartbeat(api(), credentials[index]!, id, intervalMs);
          // A failed heartbeat of an admitted run is sent again once, half an interval later, as `den runtime` does.
          const retried = runtime.admitted && answer.status !== '200' && answer.status !== '429';
          if (retried) {
            count(answer, sentAt);
            await new Promise((r) => setTimeout(r, Math.max(0, intervalMs / 2 - answer.tookMs)));
            if (stopped) break;
            answer = await sendHeartbeat(api(), credentials[index]!, id, intervalMs / 2);
          }
          const refusal = count(answer, retried ? Date.now() - answer.tookMs : sentAt);
          if (answer.status === '200') runtime.admitted = true;
          // A refused runtime waits what it was told, as `den runtime` does; the others beat on their interval.
          const waitMs = refusal && answer.retryAfterS > 0 ? answer.retryAfterS * 1000 : sentAt + intervalMs - Date.now();
          await new Promise((r) => setTimeout(r, Math.max(0, waitMs)));
        }
      }),
    );
    // Postgres seen from outside every 5 s: its client connections, and whether one can be had
    // at all. It also keeps a connection of the pool open for the check at the end.
    const postgresSeen: string[] = [];
    // The API's event-loop delay (p99 over prom-client's sampling) every 5 s: whether it, and not the engine, keeps answers waiting.
    const loopSeen: string[] = [];
    const watch = setInterval(() => {
      const at = `${((Date.now() - startedAt) / 1000).toFixed(0)} s`;
      void Promise.all(
        stack.apiUrls.map((url) =>
          fetch(`${url}/metrics`, { signal: AbortSignal.timeout(4000) })
            .then((res) => res.text())
            .then((text) => Number(/^nodejs_eventloop_lag_p99_seconds (\S+)/m.exec(text)?.[1] ?? NaN) * 1000)
            .catch(() => NaN),
        ),
      ).then((lags) => loopSeen.push(`${at}: ${lags.map((ms) => (Number.isNaN(ms) ? 'no answer' : `${Math.round(ms)} ms`)).join(', ')}`));
      sql<{ n: string }>`SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'client backend'`
        .execute(stack.database.db)
        .then((result) => postgresSeen.push(`${at}: ${result.rows[0]?.n}`))
        .catch((error: unknown) => postgresSeen.push(`${at}: ${String((error as { cause?: unknown }).cause ?? error)}`));
    }, 5000);
    // CPU while the runs are held (after the ramp): where the steady state's time goes.
    await new Promise((r) => setTimeout(r, Math.max(0, rampEnd - Date.now())));
    const cpu = await measureCpu(stack.processes);
    // The simulated runtimes share the machine: their own CPU (this process only) is part of where the time goes.
    const clientFrom = { usage: process.cpuUsage(), at: Date.now() };
    await new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())));
    const clientUsage = process.cpuUsage(clientFrom.usage);
    const cpuPercent = {
      ...(await cpu()),
      'bench client': Math.round(((clientUsage.user + clientUsage.system) / 1000 / Math.max(1, Date.now() - clientFrom.at)) * 100),
    };
    const metrics = await Promise.all(
      stack.apiUrls.map((url) =>
        fetch(`${url}/metrics`)
          .then((res) => res.text())
          .catch((error: unknown) => {
            console.error(`${url}/metrics: ${String(error)}`);
            return '';
          }),
      ),
    );
    const count = (pattern: string) => metrics.reduce((sum, text) => sum + Number(new RegExp(`${pattern} (\\d+)`).exec(text)?.[1] ?? 0), 0);
    const forwarded = count('den_run_heartbeats_total\\{result="forwarded"\\}');
    const coalesced = count('den_run_heartbeats_total\\{result="coalesced"\\}');
    const refusedMetric = count('den_run_capacity_total\\{via="report",result="refused"\\}');
    const apiRss = Math.max(...(await Promise.all(stack.apiUrls.map(rssMiB))));
    const workerRss = await largestRssMiB(stack.workerPids);
    const admittedIds = ids.filter((id) => seen.get(id)!.admitted);
    // Every admitted run must still be running, by its row in Postgres (the record the run
    // workflow keeps; a lost lease writes awaiting_retry there). One query rather than a Temporal
    // query per run: under this load those time out, which says nothing about the lease.
    // A run admitted in the last seconds may not have written its row yet: wait for every admitted run's.
    let lastRows: { run_id: string; status: string; error: string | null }[] | undefined;
    const rows = await waitFor(
      async () => {
        const result = await sql<{ run_id: string; status: string; error: string | null }>`
          SELECT run_id, status, summary->>'error' AS error FROM automation_runs
          WHERE organization_id = ${org.organizationId} AND run_id = ANY(${ids})`.execute(stack.database.db);
        lastRows = result.rows;
        const have = new Set(result.rows.map((row) => row.run_id));
        return admittedIds.every((id) => have.has(id)) ? result : undefined;
      },
      60_000,
      { what: "the runs' rows", intervalMs: 2000 },
    ).catch((error: unknown) => {
      // Still print what was measured: the leases count as unchecked.
      console.error(String(error));
      return { rows: lastRows ?? ids.map((run_id) => ({ run_id, status: 'not checked (Postgres unreachable)', error: null })) };
    });
    clearInterval(watch);
    console.log(`Postgres client connections, every 5 s: ${postgresSeen.join('; ')}`);
    console.log(`API event-loop delay p99, every 5 s: ${loopSeen.join('; ')}`);
    const seenById = new Map(rows.rows.map((row) => [row.run_id, row.error ? `${row.status}/${row.error}` : row.status]));
    const notRunning: Record<string, number> = {};
    for (const id of admittedIds) {
      const status = seenById.get(id) ?? 'no row';
      if (status !== 'running') notRunning[status] = (notRunning[status] ?? 0) + 1;
    }
    // A refused run must have left nothing behind: no row, no workflow.
    const refusedWithRow = ids.filter((id) => !seen.get(id)!.admitted && seenById.has(id)).length;
    const lost = Object.values(notRunning).reduce((a, b) => a + b, 0);
    const refusedRuns = runs - admittedIds.length;
    const refusals = [...seen.values()].reduce((n, r) => n + r.refused, 0);
    const refusedBadly = [...seen.values()].reduce((n, r) => n + r.refusedBadly, 0);
    const ackP99 = percentileOf(ackMs, 99);
    console.log(
      `statuses: ${JSON.stringify(statuses)}; admitted runs' statuses: ${JSON.stringify(admittedStatuses)}; ` +
        `CPU while held, % of one core: ${JSON.stringify(cpuPercent)}`,
    );
    if (lost > 0) {
      console.log(`admitted, not running at the end: ${JSON.stringify(notRunning)}`);
      const first = admittedIds.find((id) => seenById.get(id) !== 'running');
      // Best effort: under this load Temporal may refuse the history too, and the table matters more.
      if (first)
        await printLeaseTimeline(stack, org.organizationId, first, seenById.get(first) ?? 'no row').catch((error: unknown) =>
          console.error(`no lease timeline: ${String(error)}`),
        );
    }
    stopped = true;
    await loops;
    const ratio = forwarded / Math.max(1, forwarded + coalesced);
    const markdown = [
      `| runs offered | admitted | refused (429 answers; without Retry-After) | interval s | ramp s | held s | lease s | window (× lease) | heartbeats sent | admitted runs' non-200 (after the ramp) | heartbeat ack p50 / p99 ms | forwarded | coalesced | forwarded ÷ received | admitted, lease lost | API / worker RSS MiB |`,
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
      `| ${runs} | ${admittedIds.length} | ${refusedRuns} (${refusals}; ${refusedBadly}) | ${values.interval} | ${values.ramp} | ${values.duration} | ${values.lease} | ${values.fraction ?? 'default'} | ${sent} | ${failed} (${failedAfterRamp}) | ${percentileOf(ackMs, 50)} / ${ackP99} | ${forwarded} | ${coalesced} | ${ratio.toFixed(3)} | ${lost} | ${apiRss} / ${workerRss ?? '—'} |`,
    ].join('\n');
    console.log(`\n${markdown}\n`);
    await writeResults(
      {
        kind: 'heartbeats',
        topology: values.cluster ? 'cluster' : 'embedded',
        description: stack.description,
        ...values,
        runs,
        admitted: admittedIds.length,
        refusedRuns,
        refusals,
        refusalsCounted: refusedMetric,
        refusedBadly,
        refusedFor,
        refusedWithRow,
        sent,
        failed,
        failedAfterRamp,
        statuses,
        admittedStatuses,
        ackP50: percentileOf(ackMs, 50),
        ackP99,
        forwarded,
        coalesced,
        lost,
        notRunning,
        apiRssMiB: apiRss,
        workerRssMiB: workerRss,
        cpuPercent,
      },
      `${markdown}\n\nEach runtime's credential: ${values.credential}. Statuses: ${JSON.stringify(statuses)}; the admitted runs': ${JSON.stringify(admittedStatuses)}. ` +
        `Refusals by reason: ${JSON.stringify(refusedFor)}; counted by the API as capacity (den_run_capacity_total): ${refusedMetric}. Refused runs with a row: ${refusedWithRow}. ` +
        `CPU while held, % of one core: ${JSON.stringify(cpuPercent)}.\n`,
    );
    return lost === 0 && failedAfterRamp === 0 && refusedBadly === 0 && refusedWithRow === 0 ? 0 : 1;
  } finally {
    await stack.stop();
  }
}

/**
 * For a run found not running: when each heartbeat signal was written, which workflow task
 * applied it, and when the lease timer fired, so a lost lease can be read against its
 * heartbeats.
 */
async function printLeaseTimeline(stack: LoadStack, organizationId: string, id: string, status: string): Promise<void> {
  const history = await stack.temporal.client.workflow.getHandle(runWorkflowId(organizationId, id)).fetchHistory();
  const t0 = history.events?.[0] ? historyEventMs(history.events[0]) : 0;
  const lines = (history.events ?? []).map((event) => {
    const at = historyEventMs(event) - t0;
    const kind =
      Object.keys(event)
        .find((key) => key.endsWith('EventAttributes'))
        ?.replace('EventAttributes', '') ?? '?';
    return `${(at / 1000).toFixed(1).padStart(7)} s ${kind}`;
  });
  console.log(`lease timeline of ${id} (${status}):\n${lines.join('\n')}`);
}

// Run as `npm run bench`, not when bench/admission.ts borrows its scenarios.
if (require.main === module) {
  const [first, ...rest] = process.argv.slice(2);
  const commands: Record<string, (argv: string[]) => Promise<number>> = {
    heartbeats,
    histories: () => printHistoryCosts(),
    unauthenticated: unauthenticatedMemory,
    fairness: fairnessBench,
    admission: async (argv) => (await import('./admission')).admissionBench(argv),
    'slack-irrelevant': async (argv) => (await import('./slack-irrelevant')).slackIrrelevantBench(argv),
  };
  const run = first && commands[first] ? commands[first](rest) : loadScenarios(first ? [first, ...rest] : rest);
  exitWith(run);
}
