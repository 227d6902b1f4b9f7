/**
 * `npm run bench -- fairness [--duration 20] [--connections 32] [--interval 250] [--cluster]`
 *
 * Two tenants on one stack. Organization A floods GitHub pushes and run events over
 * `--connections` connections; organization B sends one GitHub push, one Slack mention, one run
 * event and one heartbeat every `--interval` ms. Measured three ways, each on a fresh stack:
 *
 * - **B alone**, and **A alone** (A's solo throughput);
 * - **under A's flood, mechanism off** (TEMPORAL_FAIRNESS=false, ADMISSION=false: no fairness
 *   keys, so the queue is first in, first out, and no admission), the code before fair shares;
 * - **under A's flood, mechanism on** (the defaults).
 *
 * Reports B's ack p50/p99 per kind, B's processing latency (ack → its row: the sync event, the
 * persisted run event, the pending Slack invocation) p50/p99, A's acked rate and what A was shed
 * (its 429s and 503s). Results go to bench/results/, in files named by date and `-fairness`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { createTarget } from '../src/github/targets';
import { signGithubPayload } from '../src/github/signature';
import { createSlackConnection } from '../src/slack/connections';
import { signSlackRequest } from '../src/slack/signature';
import { createTestOrg } from '../test/harness/identity';
import { waitFor } from '../test/harness/wait';
import { startClusterLoadStack } from './lib/cluster-stack';
import { runLoad, type GeneratedRequest, type LoadResult } from './lib/load';
import { asLoadStack, startBenchStack, type LoadStack } from './lib/stack';

type Kind = 'push' | 'mention' | 'event' | 'heartbeat';
const KINDS: Kind[] = ['push', 'mention', 'event', 'heartbeat'];

interface Tenant {
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
  ackMs: number;
}

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

function pushRequest(stack: LoadStack, tenant: Tenant): GeneratedRequest {
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

function mentionRequest(tenant: Tenant): GeneratedRequest {
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
  const timestamp = Math.floor(Date.now() / 1000);
  return {
    id: eventId,
    method: 'POST',
    path: `/v1/integrations/slack/${tenant.slack.connectionId}/events`,
    headers: {
      'content-type': 'application/json',
      'x-slack-request-timestamp': String(timestamp),
      'x-slack-signature': signSlackRequest(tenant.slack.secret, timestamp, body),
    },
    body,
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

async function send(url: string, request: GeneratedRequest): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  try {
    const res = await fetch(`${url}${request.path}`, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      signal: AbortSignal.timeout(15_000),
    });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - started };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

async function tenant(stack: LoadStack, name: string): Promise<Tenant> {
  const org = await createTestOrg(stack.database.db, name);
  const secret = randomUUID();
  const teamId = `T${name.toUpperCase()}${randomBytes(3).toString('hex').toUpperCase()}`;
  const connection = await createSlackConnection(stack.database.db, Buffer.from(stack.secretKey, 'hex'), {
    organizationId: org.organizationId,
    teamId,
    apiAppId: 'ABENCH0001',
    signingSecret: secret,
    botToken: 'xoxb-bench',
  });
  // eslint-disable-next-line @typescript-eslint/no-require-imports, @typescript-eslint/no-explicit-any
  const examples = require('@octokit/webhooks-examples/api.github.com/index.json') as { name: string; examples: Record<string, any>[] }[];
  const push = structuredClone(
    examples.find((e) => e.name === 'push')!.examples.find((p) => p.installation && p.ref === 'refs/heads/master')!,
  );
  const n = 1_000_000 + Math.floor(Math.random() * 1e9);
  push.installation.id = n;
  push.repository.id = n;
  push.repository.full_name = `bench-${name}-${n}/repo`;
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
      pending.push(
        send(stack.apiUrls[i % stack.apiUrls.length]!, request).then(
          ({ status, ms }) => void samples.push({ kind, id: request.id, status, sentAt, ackMs: ms }),
        ),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  await Promise.all(pending);
  return samples;
}

/** A's flood: pushes and new runs' events, alternating, over `connections` connections. */
function flood(stack: LoadStack, a: Tenant, connections: number, seconds: number): Promise<LoadResult> {
  let i = 0;
  return runLoad({
    url: stack.apiUrls,
    connections,
    durationSeconds: seconds,
    next: () => (i++ % 2 === 0 ? pushRequest(stack, a) : eventRequest(a, `bench-${randomUUID()}`, 1)),
  });
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

interface PhaseResult {
  phase: string;
  b?: Record<string, { ackP50: number; ackP99: number; non2xx: number; processedP50: number; processedP99: number; unprocessed: number }>;
  a?: { ackedPerSecond: number; statuses: Record<string, number> };
}

function summarize(
  phase: string,
  samples: Sample[] | undefined,
  processed: Record<string, number[]> | undefined,
  a: LoadResult | undefined,
  seconds: number,
): PhaseResult {
  const b = samples
    ? Object.fromEntries(
        KINDS.map((kind) => {
          const mine = samples.filter((s) => s.kind === kind);
          const done = (processed?.[kind] ?? []).filter((v) => !Number.isNaN(v));
          const round = (v: number) => Math.round(v);
          return [
            kind,
            {
              ackP50: round(
                percentile(
                  mine.map((s) => s.ackMs),
                  50,
                ),
              ),
              ackP99: round(
                percentile(
                  mine.map((s) => s.ackMs),
                  99,
                ),
              ),
              non2xx: mine.filter((s) => s.status < 200 || s.status >= 300).length,
              processedP50: round(percentile(done, 50)),
              processedP99: round(percentile(done, 99)),
              unprocessed: (processed?.[kind] ?? []).length - done.length,
            },
          ];
        }),
      )
    : undefined;
  return { phase, b, a: a ? { ackedPerSecond: Math.round(a.acked.length / seconds), statuses: a.statuses } : undefined };
}

async function startStack(cluster: boolean, env: Record<string, string>): Promise<LoadStack> {
  const base = {
    SLACK_WORKSPACE_QUOTA_PER_MINUTE: '100000000',
    SLACK_USER_QUOTA_PER_MINUTE: '100000000',
    RUN_LEASE_TIMEOUT: '1h',
    RUN_MAX_DURATION: '2h',
    ...env,
  };
  return cluster ? startClusterLoadStack({ env: base }) : asLoadStack(await startBenchStack({ apiEnv: base, workerEnv: base }));
}

/** One stack, one mechanism setting: the phases it measures. */
async function measure(options: {
  cluster: boolean;
  mechanism: boolean;
  phases: ('b-alone' | 'a-alone' | 'flood')[];
  seconds: number;
  connections: number;
  intervalMs: number;
}): Promise<PhaseResult[]> {
  const env: Record<string, string> = options.mechanism ? {} : { TEMPORAL_FAIRNESS: 'false', ADMISSION: 'false' };
  const stack = await startStack(options.cluster, env);
  const label = options.mechanism ? 'on' : 'off';
  const results: PhaseResult[] = [];
  try {
    const a = await tenant(stack, 'a');
    const b = await tenant(stack, 'b');
    for (const phase of options.phases) {
      process.stderr.write(`fairness (${label}): ${phase}, ${options.seconds} s\n`);
      const ms = options.seconds * 1000;
      const [samples, load] = await Promise.all([
        phase === 'a-alone' ? undefined : steady(stack, b, options.intervalMs, ms),
        phase === 'b-alone' ? undefined : flood(stack, a, options.connections, options.seconds),
      ]);
      const processed = samples ? await processedMs(stack, b, samples) : undefined;
      const name =
        phase === 'flood'
          ? `B under A's flood, mechanism ${label}`
          : phase === 'a-alone'
            ? `A alone, mechanism ${label}`
            : `B alone, mechanism ${label}`;
      results.push(summarize(name, samples, processed, load, options.seconds));
    }
  } finally {
    await stack.stop();
  }
  return results;
}

function markdown(results: PhaseResult[], header: string): string {
  const bRows = results.flatMap((r) =>
    r.b
      ? KINDS.map((k) => {
          const v = r.b![k]!;
          return `| ${r.phase} | ${k} | ${v.ackP50} / ${v.ackP99} | ${k === 'heartbeat' ? '—' : `${v.processedP50} / ${v.processedP99}`} | ${v.non2xx} | ${k === 'heartbeat' ? '—' : v.unprocessed} |`;
        })
      : [],
  );
  const aRows = results.filter((r) => r.a).map((r) => `| ${r.phase} | ${r.a!.ackedPerSecond} | ${JSON.stringify(r.a!.statuses)} |`);
  return [
    header,
    '',
    "| phase | B's kind | ack p50 / p99 ms | processed (ack → row) p50 / p99 ms | non-2xx | acked, not processed |",
    '|---|---|---|---|---|---|',
    ...bRows,
    '',
    "| phase | A acked/s | A's answers by status (429 and 503: shed) |",
    '|---|---|---|',
    ...aRows,
    '',
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
    },
  });
  const common = {
    cluster: values.cluster,
    seconds: Number(values.duration),
    connections: Number(values.connections),
    intervalMs: Number(values.interval),
  };
  const off = await measure({ ...common, mechanism: false, phases: ['b-alone', 'flood'] });
  const on = await measure({ ...common, mechanism: true, phases: ['b-alone', 'a-alone', 'flood'] });
  const results = [...off, ...on];
  const header = `Two tenants, ${values.cluster ? 'npm run cluster' : 'the embedded stack'}: A floods over ${common.connections} connections for ${common.seconds} s; B sends each kind every ${common.intervalMs} ms.`;
  const md = markdown(results, header);
  console.log(`\n${md}`);
  const dir = path.join(__dirname, 'results');
  await fs.mkdir(dir, { recursive: true });
  const stamp = `${new Date().toISOString().replace(/[:.]/g, '-')}-fairness`;
  await fs.writeFile(path.join(dir, `${stamp}.json`), `${JSON.stringify({ kind: 'fairness', ...common, results }, null, 2)}\n`);
  await fs.writeFile(path.join(dir, `${stamp}.md`), md);
  return 0;
}
