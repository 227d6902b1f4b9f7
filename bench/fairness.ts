/**
 * `npm run bench -- fairness [--duration 20] [--connections 32] [--interval 250] [--cluster]
 *   [--mechanism on|off|fixed|both|all] [--flood ignores|honours] [--env NAME=VALUE …] [--server-config key=value …]`
 *
 * Two tenants on one stack. Organization A floods GitHub pushes and run events over
 * `--connections` connections and, by default, ignores Retry-After, as a misbehaving sender
 * would (`--flood honours` waits it out); organization B sends one GitHub push, one Slack
 * mention, one run event and one heartbeat every `--interval` ms, and sends a shed request again
 * after its Retry-After, as its real sender would. Each mechanism setting runs on a fresh stack,
 * in three phases: B alone, A alone, B under A's flood.
 *
 * - **mechanism off** (TEMPORAL_FAIRNESS=false, ADMISSION=false: no fairness keys, so the queue is
 *   first in, first out, and no admission): the code before fair shares. A alone here is the
 *   machine's ceiling for this work: everything is acked, and its rate is counted over the load
 *   and the drain after it;
 * - **mechanism fixed**: fair shares and a fixed admission rate per organization
 *   (ADMISSION_ORG_RATE=50, ADMISSION_DELAY_TARGET=1h so the measured delay never binds): the code
 *   before admission by measured delay;
 * - **mechanism on**: the defaults, or what `--env` sets (and `--server-config`, the embedded dev
 *   server's dynamic config).
 *
 * Reports B's ack p50/p99 per kind (first send to last answer), B's processing latency (ack → its
 * row: the sync event, the persisted run event, the pending Slack invocation) p50/p99, the goals
 * as ratios, where B's first workflow task spent its time (from its history), and A's acked and
 * sustained rates and what A was shed (its 429s and 503s). Results go to bench/results/, in files
 * named by date and `-fairness`. Exits non-zero if anything acked was never processed.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { temporal } from '@temporalio/proto';
import { sql } from 'kysely';
import { githubDeliveryWorkflowId } from '../src/github/contract';
import { bindInstallation } from '../src/github/installations';
import { createTarget } from '../src/github/target-records';
import { signGithubPayload } from '../src/github/signature';
import { createSlackConnection } from '../src/slack/connections';
import { slackEventWorkflowId } from '../src/slack/contract';
import { signSlackRequest } from '../src/slack/signature';
import { createTestOrg } from '../test/harness/identity';
import { waitFor } from '../test/harness/wait';
import { startClusterLoadStack } from './lib/cluster-stack';
import type { GeneratedRequest } from './lib/load';
import { measureCpu } from './lib/cpu';
import { percentile } from './lib/percentile';
import { envOptions } from './lib/env-options';
import { historyEventMs } from './lib/history-time';
import { asLoadStack, startBenchStack, type LoadStack } from './lib/stack';

type Kind = 'push' | 'mention' | 'event' | 'heartbeat';
const KINDS: Kind[] = ['push', 'mention', 'event', 'heartbeat'];

export interface Tenant {
  organizationId: string;
  apiKey: string;
  push: Record<string, unknown>;
  slack: { connectionId: string; secret: string; teamId: string; appId: string };
  /** A run that holds its lease, for heartbeats; and the run B's events go to. */
  liveRunId: string;
  sequence: number;
}

interface Sample {
  kind: Kind;
  id: string;
  status: number;
  sentAt: number;
  /** From the first send to the last answer, retries of shed answers included. */
  ackMs: number;
  /** Answers that shed it (429 or 503 with Retry-After) before the last. */
  shed: number;
}

export function pushRequest(stack: LoadStack, tenant: Tenant): GeneratedRequest {
  const deliveryId = randomUUID();
  const body = JSON.stringify({ ...tenant.push, after: randomBytes(20).toString('hex') });
  return {
    id: deliveryId,
    method: 'POST',
    path: '/v1/webhooks/connectors/github',
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'push',
      'x-github-delivery': deliveryId,
      'x-hub-signature-256': signGithubPayload(stack.githubSecret, body),
    },
    body,
  };
}

function eventRequest(tenant: Tenant, runId: string, sequence: number): GeneratedRequest {
  return {
    id: `${runId}/${sequence}`,
    method: 'POST',
    path: `/v1/automation-runs/${runId}/events`,
    headers: { 'content-type': 'application/json', 'x-api-key': tenant.apiKey },
    body: JSON.stringify({ attempt: 1, sequence, type: 'assistant', payload: { text: 'hi' }, createdAt: Date.now() }),
  };
}

export function mentionRequest(tenant: Tenant): GeneratedRequest {
  const eventId = `Ev${randomUUID().replace(/-/g, '')}`;
  const user = `UB${randomUUID().replace(/-/g, '').slice(0, 8).toUpperCase()}`;
  const body = JSON.stringify({
    type: 'event_callback',
    token: 'unused',
    team_id: tenant.slack.teamId,
    api_app_id: tenant.slack.appId,
    event_id: eventId,
    event_time: Math.floor(Date.now() / 1000),
    event: { type: 'app_mention', user, channel: 'CBENCH0001', ts: `${Date.now() / 1000}`, text: '<@UBOT> hello' },
  });
  return {
    id: eventId,
    method: 'POST',
    path: `/v1/integrations/slack/${tenant.slack.connectionId}/events`,
    headers: { 'content-type': 'application/json', ...slackSignature(tenant, body) },
    body,
  };
}

function slackSignature(tenant: Tenant, body: string): Record<string, string> {
  const timestamp = Math.floor(Date.now() / 1000);
  return { 'x-slack-request-timestamp': String(timestamp), 'x-slack-signature': signSlackRequest(tenant.slack.secret, timestamp, body) };
}

/** Slack's retry of an event: the same body, signed again now, with its retry headers. */
export function slackRetry(tenant: Tenant, request: GeneratedRequest, retryNum: number): GeneratedRequest {
  return {
    ...request,
    headers: {
      ...request.headers,
      ...slackSignature(tenant, request.body!),
      'x-slack-retry-num': String(retryNum),
      'x-slack-retry-reason': 'http_error',
    },
  };
}

function nextOf(stack: LoadStack, tenant: Tenant, kind: Kind): GeneratedRequest {
  switch (kind) {
    case 'push':
      return pushRequest(stack, tenant);
    case 'mention':
      return mentionRequest(tenant);
    case 'event':
      return eventRequest(tenant, tenant.liveRunId, ++tenant.sequence);
    case 'heartbeat':
      return {
        id: tenant.liveRunId,
        method: 'POST',
        path: `/v1/automation-runs/${tenant.liveRunId}/heartbeat`,
        headers: { 'content-type': 'application/json', 'x-api-key': tenant.apiKey },
        body: JSON.stringify({ attempt: 1 }),
      };
  }
}

export async function sendOnce(url: string, request: GeneratedRequest): Promise<{ status: number; ms: number; retryAfter?: number }> {
  const started = performance.now();
  try {
    const res = await fetch(`${url}${request.path}`, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      signal: AbortSignal.timeout(15_000),
    });
    await res.arrayBuffer();
    const retryAfter = Number(res.headers.get('retry-after'));
    return { status: res.status, ms: performance.now() - started, ...(retryAfter > 0 ? { retryAfter } : {}) };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

/** At most this many sends of one request: the first and the retries of a shed one. */
const MAX_SENDS = 5;

/**
 * Sends `request` as its real sender would: a shed answer (429 or 503 with Retry-After) is sent
 * again after the wait it names (Slack and GitHub retry, `den runtime` honours Retry-After), with
 * a fresh signature where the request carries one. `ms` runs from the first send to the last
 * answer; `shed` counts the answers that asked for a retry.
 */
async function send(
  url: string,
  request: GeneratedRequest,
  resign: (request: GeneratedRequest, retryNum: number) => GeneratedRequest = (r) => r,
): Promise<{ status: number; ms: number; shed: number }> {
  const started = performance.now();
  let shed = 0;
  for (let sends = 1; ; sends++) {
    const answer = await sendOnce(url, sends === 1 ? request : resign(request, sends - 1));
    const retryable = (answer.status === 429 || answer.status === 503) && answer.retryAfter !== undefined;
    if (!retryable || sends === MAX_SENDS) return { status: answer.status, ms: performance.now() - started, shed };
    shed++;
    await new Promise((resolve) => setTimeout(resolve, answer.retryAfter! * 1000));
  }
}

export async function tenant(stack: LoadStack, name: string): Promise<Tenant> {
  const org = await createTestOrg(stack.database.db, name);
  const secret = randomUUID();
  const teamId = `T${name.toUpperCase()}${randomBytes(3).toString('hex').toUpperCase()}`;
  const connection = await createSlackConnection(
    { db: stack.database.db, secretKey: Buffer.from(stack.secretKey, 'hex') },
    {
      organizationId: org.organizationId,
      teamId,
      apiAppId: 'ABENCH0001',
      signingSecret: secret,
      botToken: 'xoxb-bench',
    },
  );
  // eslint-disable-next-line @typescript-eslint/no-require-imports, @typescript-eslint/no-explicit-any
  const examples = require('@octokit/webhooks-examples/api.github.com/index.json') as { name: string; examples: Record<string, any>[] }[];
  const push = structuredClone(
    examples.find((e) => e.name === 'push')!.examples.find((p) => p.installation && p.ref === 'refs/heads/master')!,
  );
  const n = 1_000_000 + Math.floor(Math.random() * 1e9);
  push.installation.id = n;
  push.repository.id = n;
  push.repository.full_name = `bench-${name}-${n}/repo`;
  await bindInstallation(stack.database.db, { installationId: n, organizationId: org.organizationId, via: 'operator' });
  await createTarget(stack.database.db, {
    organizationId: org.organizationId,
    installationId: n,
    repositoryFullName: push.repository.full_name,
    repositoryId: n,
  });
  const t: Tenant = {
    organizationId: org.organizationId,
    apiKey: org.owner.apiKey,
    push,
    slack: { connectionId: connection.connectionId, secret, teamId, appId: 'ABENCH0001' },
    liveRunId: `bench-live-${randomUUID()}`,
    sequence: 0,
  };
  // The live run: its first event starts it running, so its heartbeats are a leased run's.
  const first = await send(stack.apiUrls[0]!, eventRequest(t, t.liveRunId, ++t.sequence));
  if (first.status !== 200) throw new Error(`the live run of ${name} did not start: ${first.status}`);
  return t;
}

/** B's steady traffic: every kind once per interval, until `stop` resolves. */
async function steady(stack: LoadStack, b: Tenant, intervalMs: number, durationMs: number): Promise<Sample[]> {
  const samples: Sample[] = [];
  const pending: Promise<void>[] = [];
  const end = Date.now() + durationMs;
  for (let i = 0; Date.now() < end; i++) {
    for (const kind of KINDS) {
      const request = nextOf(stack, b, kind);
      const sentAt = Date.now();
      const resign = kind === 'mention' ? (r: GeneratedRequest, n: number) => slackRetry(b, r, n) : undefined;
      pending.push(
        send(stack.apiUrls[i % stack.apiUrls.length]!, request, resign).then(
          ({ status, ms, shed }) => void samples.push({ kind, id: request.id, status, sentAt, ackMs: ms, shed }),
        ),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  await Promise.all(pending);
  return samples;
}

/** Whether A's flood waits out the Retry-After it is given. */
type FloodRetryAfter = 'ignores' | 'honours';

/** What A's flood got: the ids of its acked requests and its answers by status. */
interface Flood {
  acked: string[];
  statuses: Record<string, number>;
}

/**
 * A's flood: pushes and new runs' events, alternating, over `connections` connections, each
 * sending its next request as soon as the last is answered. With `honours`, a shed connection
 * waits the Retry-After it was given, as `den runtime` does and as GitHub's redelivery (asked by
 * the reconcile) does; with `ignores` it sends the next request at once.
 */
async function flood(stack: LoadStack, a: Tenant, connections: number, seconds: number, retryAfter: FloodRetryAfter): Promise<Flood> {
  const result: Flood = { acked: [], statuses: {} };
  const end = Date.now() + seconds * 1000;
  let i = 0;
  const connection = async (n: number) => {
    const url = stack.apiUrls[n % stack.apiUrls.length]!;
    while (Date.now() < end) {
      const request = i++ % 2 === 0 ? pushRequest(stack, a) : eventRequest(a, `bench-${randomUUID()}`, 1);
      const answer = await sendOnce(url, request);
      result.statuses[answer.status] = (result.statuses[answer.status] ?? 0) + 1;
      if (answer.status >= 200 && answer.status < 300) result.acked.push(request.id);
      else if (retryAfter === 'honours' && answer.retryAfter !== undefined)
        await new Promise((resolve) => setTimeout(resolve, Math.min(answer.retryAfter! * 1000, end - Date.now())));
    }
  };
  await Promise.all(Array.from({ length: connections }, (_, n) => connection(n)));
  return result;
}

/** When each acked sample was processed (its row's time), in ms after its ack; NaN when never within the wait. */
async function processedMs(stack: LoadStack, b: Tenant, samples: Sample[]): Promise<Record<string, number[]>> {
  const acked = samples.filter((s) => s.status >= 200 && s.status < 300 && s.kind !== 'heartbeat');
  const db = stack.database.db;
  const rowTime = async (s: Sample): Promise<number | undefined> => {
    if (s.kind === 'push') {
      const r = await sql<{ t: Date }>`SELECT created_at AS t FROM github_sync_events WHERE delivery_id = ${s.id} LIMIT 1`.execute(db);
      return r.rows[0]?.t.getTime();
    }
    if (s.kind === 'mention') {
      const r = await sql<{ t: Date }>`SELECT created_at AS t FROM slack_pending_invocations WHERE event_id = ${s.id} LIMIT 1`.execute(db);
      return r.rows[0]?.t.getTime();
    }
    const [runId, sequence] = s.id.split('/');
    const r = await sql<{
      t: Date;
    }>`SELECT persisted_at AS t FROM automation_run_events WHERE organization_id = ${b.organizationId} AND run_id = ${runId} AND sequence = ${Number(sequence)} LIMIT 1`.execute(
      db,
    );
    return r.rows[0]?.t.getTime();
  };
  const times = new Map<Sample, number>();
  await waitFor(
    async () => {
      for (const s of acked) {
        if (times.has(s)) continue;
        const t = await rowTime(s);
        // A run event's row can land before its ack reaches the sender: that is no wait, 0.
        if (t !== undefined) times.set(s, Math.max(0, t - (s.sentAt + s.ackMs)));
      }
      return times.size === acked.length;
    },
    180_000,
    { intervalMs: 1000, what: "B's acked work to be processed" },
  ).catch(() => undefined);
  const out: Record<string, number[]> = {};
  for (const s of acked) (out[s.kind] ??= []).push(times.get(s) ?? NaN);
  return out;
}

/** Where a workflow's first task spent its time, in ms: waiting to be handed to a worker, and running there. */
interface FirstTask {
  queuedMs: number;
  runningMs: number;
}

/**
 * B's processing happens in its workflow's first workflow task (the row is a local activity of
 * it), so the history splits the wait in two: started → task started is the queue (history's
 * transfer, matching's backlog, a free poller), task started → completed is the worker.
 */
async function firstTasks(stack: LoadStack, b: Tenant, samples: Sample[]): Promise<Record<string, FirstTask[]>> {
  const Type = temporal.api.enums.v1.EventType;
  const out: Record<string, FirstTask[]> = {};
  const acked = samples.filter((s) => s.status >= 200 && s.status < 300 && (s.kind === 'push' || s.kind === 'mention'));
  await Promise.all(
    acked.map(async (s) => {
      const id = s.kind === 'push' ? githubDeliveryWorkflowId(s.id) : slackEventWorkflowId(b.slack.connectionId, s.id);
      const history = await stack.temporal.client.workflow
        .getHandle(id)
        .fetchHistory()
        .catch(() => undefined);
      const events = history?.events ?? [];
      const at = (type: temporal.api.enums.v1.EventType) => events.find((e) => e.eventType === type);
      const started = at(Type.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED);
      const taskStarted = at(Type.EVENT_TYPE_WORKFLOW_TASK_STARTED);
      const taskCompleted = at(Type.EVENT_TYPE_WORKFLOW_TASK_COMPLETED);
      if (!started || !taskStarted || !taskCompleted) return;
      (out[s.kind] ??= []).push({
        queuedMs: historyEventMs(taskStarted) - historyEventMs(started),
        runningMs: historyEventMs(taskCompleted) - historyEventMs(taskStarted),
      });
    }),
  );
  return out;
}

/**
 * A's sustained rate: its acked work over the load and the drain after it, the drain ending
 * when the last of A's acked pushes has its sync row (its run events are rows before their ack).
 */
async function sustained(
  stack: LoadStack,
  load: Flood,
  seconds: number,
  loadEnd: number,
): Promise<{ perSecond: number; drainSeconds: number; lost: number }> {
  const pushes = load.acked.filter((id) => !id.includes('/'));
  const db = stack.database.db;
  let last = loadEnd;
  let found = 0;
  await waitFor(
    async () => {
      const r = await sql<{ n: string; t: Date | null }>`
        SELECT count(DISTINCT delivery_id) AS n, max(created_at) AS t FROM github_sync_events WHERE delivery_id = ANY(${pushes})`.execute(
        db,
      );
      found = Number(r.rows[0]!.n);
      last = Math.max(loadEnd, r.rows[0]!.t?.getTime() ?? loadEnd);
      return found === pushes.length;
    },
    180_000,
    { intervalMs: 1000, what: "A's acked pushes to be processed" },
  ).catch(() => undefined);
  const drainSeconds = (last - loadEnd) / 1000;
  return {
    perSecond: Math.round(load.acked.length / (seconds + drainSeconds)),
    drainSeconds: Math.round(drainSeconds * 10) / 10,
    lost: pushes.length - found,
  };
}

type Phase = 'b-alone' | 'a-alone' | 'flood';

type Mechanism = 'off' | 'fixed' | 'on';

/** What each mechanism setting sets on every API and worker process, before `--env`. */
const SWITCHES: Record<Mechanism, Record<string, string>> = {
  off: { TEMPORAL_FAIRNESS: 'false', ADMISSION: 'false' },
  fixed: { ADMISSION_ORG_RATE: '50', ADMISSION_DELAY_TARGET: '1h' },
  on: {},
};

const MECHANISMS: Record<string, Mechanism[]> = {
  off: ['off'],
  fixed: ['fixed'],
  on: ['on'],
  both: ['off', 'on'],
  all: ['off', 'fixed', 'on'],
};

interface KindResult {
  ackP50: number;
  ackP99: number;
  /** Answers that shed it before a retry was acked (429 or 503 with Retry-After). */
  shed: number;
  /** Requests that were never acked, retries included. */
  failed: number;
  processedP50: number;
  processedP99: number;
  unprocessed: number;
}

export interface PhaseResult {
  phase: Phase;
  mechanism: Mechanism;
  b?: Record<string, KindResult>;
  a?: { ackedPerSecond: number; sustainedPerSecond: number; drainSeconds: number; lost: number; statuses: Record<string, number> };
  /** B's first workflow task per kind: queued and running p50/p99 ms. */
  firstTask?: Record<string, { queuedP50: number; queuedP99: number; runningP50: number; runningP99: number }>;
  /** CPU during the load, % of one core, per part and for the load generator. */
  cpuPercent: Record<string, number>;
}

const round = (v: number) => Math.round(v);
const p50p99 = (values: number[]) => [round(percentile(values, 50)), round(percentile(values, 99))] as const;

function summarizeB(samples: Sample[], processed: Record<string, number[]>): Record<string, KindResult> {
  return Object.fromEntries(
    KINDS.map((kind) => {
      const mine = samples.filter((s) => s.kind === kind);
      const done = (processed[kind] ?? []).filter((v) => !Number.isNaN(v));
      const [ackP50, ackP99] = p50p99(mine.map((s) => s.ackMs));
      const [processedP50, processedP99] = p50p99(done);
      return [
        kind,
        {
          ackP50,
          ackP99,
          shed: mine.reduce((n, s) => n + s.shed, 0),
          failed: mine.filter((s) => s.status < 200 || s.status >= 300).length,
          processedP50,
          processedP99,
          unprocessed: (processed[kind] ?? []).length - done.length,
        },
      ];
    }),
  );
}

function summarizeTasks(tasks: Record<string, FirstTask[]>): PhaseResult['firstTask'] {
  return Object.fromEntries(
    Object.entries(tasks).map(([kind, list]) => {
      const [queuedP50, queuedP99] = p50p99(list.map((t) => t.queuedMs));
      const [runningP50, runningP99] = p50p99(list.map((t) => t.runningMs));
      return [kind, { queuedP50, queuedP99, runningP50, runningP99 }];
    }),
  );
}

async function startStack(cluster: boolean, env: Record<string, string>, serverDynamicConfig: string[]): Promise<LoadStack> {
  const base = {
    SLACK_WORKSPACE_QUOTA_PER_MINUTE: '100000000',
    SLACK_USER_QUOTA_PER_MINUTE: '100000000',
    RUN_LEASE_TIMEOUT: '1h',
    RUN_MAX_DURATION: '2h',
    ...env,
  };
  if (cluster && serverDynamicConfig.length > 0) throw new Error('--server-config applies to the embedded dev server only');
  return cluster
    ? startClusterLoadStack({ env: base })
    : asLoadStack(await startBenchStack({ apiEnv: base, workerEnv: base, serverDynamicConfig }));
}

export interface MeasureOptions {
  cluster: boolean;
  seconds: number;
  connections: number;
  intervalMs: number;
  floodRetryAfter: FloodRetryAfter;
  /** Applied to every API and worker process, after the mechanism's own switches. */
  env: Record<string, string>;
  /** More dynamic config for the embedded dev server (`key=value`). */
  serverDynamicConfig: string[];
}

/** One phase on a running stack. */
export async function phase(
  stack: LoadStack,
  a: Tenant,
  b: Tenant,
  which: Phase,
  mechanism: Mechanism,
  options: MeasureOptions,
): Promise<PhaseResult> {
  process.stderr.write(`fairness (${mechanism}): ${which}, ${options.seconds} s\n`);
  const ms = options.seconds * 1000;
  // Where the CPU goes during the load: each part of the stack, and this process (the load generator).
  const cpu = await measureCpu(stack.processes);
  const clientFrom = process.cpuUsage();
  const cpuFrom = performance.now();
  const [samples, load] = await Promise.all([
    which === 'a-alone' ? undefined : steady(stack, b, options.intervalMs, ms),
    which === 'b-alone' ? undefined : flood(stack, a, options.connections, options.seconds, options.floodRetryAfter),
  ]);
  const loadEnd = Date.now();
  const client = process.cpuUsage(clientFrom);
  const cpuPercent = {
    ...(await cpu()),
    'load generator': Math.round(((client.user + client.system) / 1000 / (performance.now() - cpuFrom)) * 100),
  };
  const [processed, drained] = await Promise.all([
    samples ? processedMs(stack, b, samples) : undefined,
    load ? sustained(stack, load, options.seconds, loadEnd) : undefined,
  ]);
  const tasks = samples ? await firstTasks(stack, b, samples) : undefined;
  return {
    phase: which,
    mechanism,
    b: samples && processed ? summarizeB(samples, processed) : undefined,
    a:
      load && drained
        ? {
            ackedPerSecond: round(load.acked.length / options.seconds),
            sustainedPerSecond: drained.perSecond,
            drainSeconds: drained.drainSeconds,
            lost: drained.lost,
            statuses: load.statuses,
          }
        : undefined,
    firstTask: tasks ? summarizeTasks(tasks) : undefined,
    cpuPercent,
  };
}

/** One stack, one mechanism setting: B alone, A alone, then B under A's flood. */
async function measure(mechanism: Mechanism, options: MeasureOptions): Promise<PhaseResult[]> {
  const switches = SWITCHES[mechanism];
  const stack = await startStack(options.cluster, { ...switches, ...options.env }, options.serverDynamicConfig);
  try {
    const a = await tenant(stack, 'a');
    const b = await tenant(stack, 'b');
    const results: PhaseResult[] = [];
    for (const which of ['b-alone', 'a-alone', 'flood'] as const) results.push(await phase(stack, a, b, which, mechanism, options));
    return results;
  } finally {
    await stack.stop();
  }
}

const PHASE_NAMES: Record<Phase, string> = { 'b-alone': 'B alone', 'a-alone': 'A alone', flood: "B under A's flood" };
const named = (r: PhaseResult) => `${PHASE_NAMES[r.phase]}, mechanism ${r.mechanism}`;
const ratio = (x: number, y: number) => (y > 0 ? `${(x / y).toFixed(1)}×` : '—');

/** The goals as ratios in one run, per mechanism setting: B's p99 under the flood over B's p99 alone. */
function goalRows(results: PhaseResult[]): string[] {
  return (['off', 'fixed', 'on'] as const).flatMap((mechanism) => {
    const alone = results.find((r) => r.phase === 'b-alone' && r.mechanism === mechanism)?.b;
    const flooded = results.find((r) => r.phase === 'flood' && r.mechanism === mechanism)?.b;
    if (!alone || !flooded) return [];
    return (['push', 'mention', 'event'] as const).map((k) => {
      const processed =
        k === 'event' ? '— (a row before its ack)' : `${ratio(flooded[k]!.processedP99, alone[k]!.processedP99)} (goal ≤ 3×)`;
      return `| ${mechanism} | ${k} | ${ratio(flooded[k]!.ackP99, alone[k]!.ackP99)} (goal ≤ 2×) | ${processed} |`;
    });
  });
}

function markdown(results: PhaseResult[], header: string): string {
  const bRows = results.flatMap((r) =>
    r.b
      ? KINDS.map((k) => {
          const v = r.b![k]!;
          const processed = k === 'heartbeat' ? '—' : `${v.processedP50} / ${v.processedP99}`;
          return `| ${named(r)} | ${k} | ${v.ackP50} / ${v.ackP99} | ${processed} | ${v.shed} | ${v.failed} | ${k === 'heartbeat' ? '—' : v.unprocessed} |`;
        })
      : [],
  );
  const taskRows = results.flatMap((r) =>
    Object.entries(r.firstTask ?? {}).map(
      ([k, v]) => `| ${named(r)} | ${k} | ${v.queuedP50} / ${v.queuedP99} | ${v.runningP50} / ${v.runningP99} |`,
    ),
  );
  const aRows = results
    .filter((r) => r.a)
    .map(
      (r) =>
        `| ${named(r)} | ${r.a!.ackedPerSecond} | ${r.a!.sustainedPerSecond} | ${r.a!.drainSeconds} | ${r.a!.lost} | ${JSON.stringify(r.a!.statuses)} |`,
    );
  const ceiling = results.find((r) => r.phase === 'a-alone' && r.mechanism === 'off')?.a;
  const kept = results
    .filter((r) => r.phase === 'a-alone' && r.mechanism !== 'off' && r.a && ceiling)
    .map(
      (r) =>
        `A alone sustains ${r.a!.sustainedPerSecond}/s with the mechanism ${r.mechanism}: ${ratio(r.a!.sustainedPerSecond, ceiling!.sustainedPerSecond)} of the machine's ceiling (A alone, mechanism off: ${ceiling!.sustainedPerSecond}/s; goal ≥ 0.8×).`,
    );
  const goals = goalRows(results);
  return [
    header,
    '',
    "| phase | B's kind | ack p50 / p99 ms | processed (ack → row) p50 / p99 ms | shed, then retried | never acked | acked, not processed |",
    '|---|---|---|---|---|---|---|',
    ...bRows,
    '',
    ...(goals.length
      ? ["| mechanism | B's kind | ack p99 flood / alone | processed p99 flood / alone |", '|---|---|---|---|', ...goals, '']
      : []),
    "| phase | B's kind | first workflow task queued (started → task started) p50 / p99 ms | running on the worker p50 / p99 ms |",
    '|---|---|---|---|',
    ...taskRows,
    '',
    '| phase | CPU during the load, % of one core |',
    '|---|---|',
    ...results.map(
      (r) =>
        `| ${named(r)} | ${Object.entries(r.cpuPercent)
          .map(([part, percent]) => `${part} ${percent}`)
          .join(', ')} |`,
    ),
    '',
    "| phase | A acked/s | A sustained/s (acked, over load + drain) | drain s | A acked, not processed | A's answers by status (429 and 503: shed) |",
    '|---|---|---|---|---|---|',
    ...aRows,
    '',
    ...kept.flatMap((line) => [line, '']),
  ].join('\n');
}

export async function fairnessBench(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '20' },
      connections: { type: 'string', default: '32' },
      interval: { type: 'string', default: '250' },
      cluster: { type: 'boolean', default: false },
      // on, off, fixed, both (off and on) or all: `on` alone is quicker when tuning the settings with --env.
      mechanism: { type: 'string', default: 'all' },
      // ignores or honours: whether A's flood waits out the Retry-After it is given.
      flood: { type: 'string', default: 'ignores' },
      // NAME=VALUE for every API and worker process, e.g. --env ADMISSION_ORG_RATE=30.
      env: { type: 'string', multiple: true, default: [] },
      // key=value dynamic config for the embedded dev server, e.g. --server-config matching.numTaskqueueReadPartitions=1.
      'server-config': { type: 'string', multiple: true, default: [] },
    },
  });
  const mechanisms = MECHANISMS[values.mechanism];
  if (!mechanisms) throw new Error(`--mechanism ${values.mechanism}: expected one of ${Object.keys(MECHANISMS).join(', ')}`);
  if (values.flood !== 'ignores' && values.flood !== 'honours') throw new Error(`--flood ${values.flood}: expected ignores or honours`);
  const options: MeasureOptions = {
    cluster: values.cluster,
    seconds: Number(values.duration),
    connections: Number(values.connections),
    intervalMs: Number(values.interval),
    floodRetryAfter: values.flood,
    env: envOptions(values.env),
    serverDynamicConfig: values['server-config'],
  };
  const results: PhaseResult[] = [];
  for (const mechanism of mechanisms) results.push(...(await measure(mechanism, options)));
  const given = [...values.env, ...values['server-config'].map((c) => `server ${c}`)];
  const settings = given.length ? ` Settings: ${given.join(', ')}.` : '';
  const header = `Two tenants, ${values.cluster ? 'npm run cluster' : 'the embedded stack'}: A floods over ${options.connections} connections for ${options.seconds} s and ${options.floodRetryAfter} Retry-After; B sends each kind every ${options.intervalMs} ms.${settings}`;
  const md = markdown(results, header);
  console.log(`\n${md}`);
  const dir = path.join(__dirname, 'results');
  await fs.mkdir(dir, { recursive: true });
  const stamp = `${new Date().toISOString().replace(/[:.]/g, '-')}-fairness`;
  const { cluster, seconds, connections, intervalMs } = options;
  await fs.writeFile(
    path.join(dir, `${stamp}.json`),
    `${JSON.stringify({ kind: 'fairness', cluster, seconds, connections, intervalMs, flood: values.flood, env: values.env, serverConfig: values['server-config'], results }, null, 2)}\n`,
  );
  await fs.writeFile(path.join(dir, `${stamp}.md`), md);
  const lost = results.reduce((n, r) => n + (r.a?.lost ?? 0) + Object.values(r.b ?? {}).reduce((m, k) => m + k.unprocessed, 0), 0);
  return lost === 0 ? 0 : 1;
}
