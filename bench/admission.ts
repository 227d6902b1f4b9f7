/**
 * `npm run bench -- admission [--duration 15] [--connections 16] [--flood-connections 32]
 *   [--interval 250] [--flood ignores|honours] [--env NAME=VALUE …]`
 *
 * Admission measured as a user would meet it, in one run on one embedded stack on the service's
 * defaults (the bench's runs alone get a long lease, so that no phase loses them to the next):
 *
 * 1. **(a)** the engine's raw start rate: workflow starts straight through the Temporal client;
 * 2. **one organization** at `--connections`: signed pushes, then events on 16 live runs: acked a
 *    second ÷ (a), what was refused, the ack p99, and the rate acked *and* processed;
 * 3. **org A's signed Slack events at 30 a second** while org B floods signed pushes over
 *    `--flood-connections`: A's answers by status, and whether each acked event has its workflow;
 * 4. **B alone**, steady: a push, a mention, an event and a heartbeat every `--interval` ms;
 * 5. **B under A's flood** over `--flood-connections` (pushes and new runs' events): B's refusals,
 *    and B's ack and processing p99 against B alone.
 *
 * Results go to bench/results/, in files named by date and `-admission`. Exits non-zero if
 * anything acked was lost.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { slackEventWorkflowId } from '../src/slack/contract';
import { measureCpu } from './lib/cpu';
import { envOptions } from './lib/env-options';
import { runLoad, findMissing, type GeneratedRequest } from './lib/load';
import { asLoadStack, startBenchStack, type LoadStack } from './lib/stack';
import { benchSecrets, ceiling, drainAfterLoad, exists, fixtures, SCENARIOS, settle, type Fixtures } from './run';
import { mentionRequest, phase, pushRequest, sendOnce, tenant, type MeasureOptions, type PhaseResult, type Tenant } from './fairness';

interface LoneResult {
  scenario: string;
  ackedPerSecond: number;
  ratioToRaw: number;
  statuses: Record<string, number>;
  refused: number;
  latencyMs: { p50: number; p99: number; max: number };
  sustainedPerSecond?: number;
  drainSeconds?: number;
  ackedButMissing: number;
  cpuPercent: Record<string, number>;
}

interface SlackUnderFlood {
  sent: number;
  statuses: Record<string, number>;
  ackedWithoutWorkflow: number;
  floodStatuses: Record<string, number>;
  floodAckedPerSecond: number;
}

/** One organization alone at `connections`, one scenario of the main bench, beside the raw rate. */
async function lone(
  stack: LoadStack,
  f: Fixtures,
  scenario: { name: string; connections: number; seconds: number; raw: number },
): Promise<LoneResult> {
  const { name, connections, seconds, raw } = scenario;
  const chosen = SCENARIOS.find((s) => s.name === name)!;
  await settle(stack);
  process.stderr.write(`admission: one organization, ${name}, ${connections} connections × ${seconds} s\n`);
  const processed = chosen.processed ? () => chosen.processed!(stack, f) : undefined;
  const baseline = processed ? await processed() : 0;
  const cpu = await measureCpu(stack.processes);
  const load = await runLoad({ url: stack.apiUrls, connections, durationSeconds: seconds, next: chosen.next(f) });
  const cpuPercent = await cpu();
  const drain = processed ? await drainAfterLoad(baseline, processed, load.acked.length) : undefined;
  const missing = chosen.durable ? await chosen.durable(stack, f, load.acked) : [];
  return {
    scenario: name,
    ackedPerSecond: load.acked.length / seconds,
    ratioToRaw: load.acked.length / seconds / raw,
    statuses: load.statuses,
    refused: (load.statuses['429'] ?? 0) + (load.statuses['503'] ?? 0),
    latencyMs: load.latency,
    ...(drain ? { sustainedPerSecond: drain.processed / (seconds + drain.seconds), drainSeconds: drain.seconds } : {}),
    ackedButMissing: missing.length,
    cpuPercent,
  };
}

/** Sends `perSecond` of `next` for `seconds`, each on its own schedule, whatever the answers take. */
async function paced(url: string, perSecond: number, seconds: number, next: () => GeneratedRequest) {
  const answers: { id: string; status: number }[] = [];
  const pending: Promise<void>[] = [];
  const start = Date.now();
  for (let i = 0; i < perSecond * seconds; i++) {
    const due = start + (i * 1000) / perSecond;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
    const request = next();
    pending.push(sendOnce(url, request).then(({ status }) => void answers.push({ id: request.id, status })));
  }
  await Promise.all(pending);
  return answers;
}

/** A's Slack events at 30 a second while B floods pushes over `connections`. */
async function slackUnderFlood(stack: LoadStack, a: Tenant, b: Tenant, connections: number, seconds: number): Promise<SlackUnderFlood> {
  await settle(stack);
  process.stderr.write(`admission: A's Slack events at 30/s while B floods pushes over ${connections} connections, ${seconds} s\n`);
  const [answers, flood] = await Promise.all([
    paced(stack.apiUrls[0]!, 30, seconds, () => mentionRequest(a)),
    runLoad({ url: stack.apiUrls, connections, durationSeconds: seconds, next: () => pushRequest(stack, b) }),
  ]);
  const statuses: Record<string, number> = {};
  for (const { status } of answers) statuses[status] = (statuses[status] ?? 0) + 1;
  const acked = answers.filter((x) => x.status === 200).map((x) => x.id);
  const missing = await findMissing(acked, (id) => exists(stack)(slackEventWorkflowId(a.slack.connectionId, id)));
  return {
    sent: answers.length,
    statuses,
    ackedWithoutWorkflow: missing.length,
    floodStatuses: flood.statuses,
    floodAckedPerSecond: flood.acked.length / seconds,
  };
}

const fixed = (v: number | undefined, digits = 0) => (v === undefined || Number.isNaN(v) ? '—' : v.toFixed(digits));

function markdown(header: string, raw: number, lones: LoneResult[], slack: SlackUnderFlood, phases: PhaseResult[]): string {
  const alone = phases.find((p) => p.phase === 'b-alone')?.b;
  const flooded = phases.find((p) => p.phase === 'flood')?.b;
  const bRows = (['push', 'mention', 'event', 'heartbeat'] as const).map((k) => {
    const x = alone?.[k];
    const y = flooded?.[k];
    const processed =
      k === 'heartbeat' || k === 'event'
        ? '—'
        : `${y?.processedP99} / ${x?.processedP99} (${fixed((y?.processedP99 ?? NaN) / (x?.processedP99 ?? NaN), 1)}×)`;
    return `| ${k} | ${y?.shed ?? '—'} | ${y?.failed ?? '—'} | ${y?.ackP99} / ${x?.ackP99} (${fixed((y?.ackP99 ?? NaN) / (x?.ackP99 ?? NaN), 1)}×) | ${processed} |`;
  });
  const a = phases.find((p) => p.phase === 'flood')?.a;
  return [
    header,
    '',
    `**(a) the engine's raw start rate**: ${fixed(raw)} starts a second.`,
    '',
    '| one organization | acked/s | ÷ (a) | refused (429 + 503) | answers by status | ack p50 / p99 / max ms | acked and processed/s (drain s) | acked but missing | CPU % of one core |',
    '|---|---|---|---|---|---|---|---|---|',
    ...lones.map(
      (l) =>
        `| ${l.scenario} | ${fixed(l.ackedPerSecond)} | ${fixed(l.ratioToRaw, 2)} | ${l.refused} | ${JSON.stringify(l.statuses)} | ${l.latencyMs.p50} / ${l.latencyMs.p99} / ${l.latencyMs.max} | ${fixed(l.sustainedPerSecond)} (${fixed(l.drainSeconds, 1)}) | ${l.ackedButMissing} | ${Object.entries(
          l.cpuPercent,
        )
          .map(([part, pct]) => `${part} ${pct}`)
          .join(', ')} |`,
    ),
    '',
    `**A's Slack events at 30/s while B floods pushes**: ${slack.sent} sent, answers ${JSON.stringify(slack.statuses)}, acked without a workflow ${slack.ackedWithoutWorkflow}; B's flood acked ${fixed(slack.floodAckedPerSecond)}/s, answers ${JSON.stringify(slack.floodStatuses)}.`,
    '',
    "| B's kind, under A's flood | refusals, then retried | never acked | ack p99 flood / alone ms | processed p99 flood / alone ms |",
    '|---|---|---|---|---|',
    ...bRows,
    '',
    a ? `A under the flood: acked ${a.ackedPerSecond}/s, sustained ${a.sustainedPerSecond}/s, answers ${JSON.stringify(a.statuses)}.` : '',
    '',
    '| phase | CPU during the load, % of one core |',
    '|---|---|',
    ...phases.map(
      (r) =>
        `| ${r.phase} | ${Object.entries(r.cpuPercent)
          .map(([part, pct]) => `${part} ${pct}`)
          .join(', ')} |`,
    ),
  ].join('\n');
}

export async function admissionBench(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '15' },
      connections: { type: 'string', default: '16' },
      'flood-connections': { type: 'string', default: '32' },
      interval: { type: 'string', default: '250' },
      flood: { type: 'string', default: 'ignores' },
      env: { type: 'string', multiple: true, default: [] },
    },
  });
  if (values.flood !== 'ignores' && values.flood !== 'honours') throw new Error(`--flood ${values.flood}: expected ignores or honours`);
  const seconds = Number(values.duration);
  const connections = Number(values.connections);
  const floodConnections = Number(values['flood-connections']);
  // The bench's own runs must outlive every phase; everything else is the service's default.
  const env = { RUN_LEASE_TIMEOUT: '1h', RUN_MAX_DURATION: '2h', ...envOptions(values.env) };
  const stack = asLoadStack(await startBenchStack({ apiEnv: env, workerEnv: env }));
  benchSecrets.github = stack.githubSecret;
  try {
    await settle(stack);
    process.stderr.write(`admission: (a) raw starts, ${connections} connections × ${seconds} s\n`);
    const raw = (await ceiling(stack, connections, seconds)).rps;
    // One organization for both scenarios: its installation can be bound to one organization only.
    const f = await fixtures(stack);
    const lones = [];
    for (const name of ['github-push', 'run-events']) lones.push(await lone(stack, f, { name, connections, seconds, raw }));
    const [a, b] = [await tenant(stack, 'a'), await tenant(stack, 'b')];
    const slack = await slackUnderFlood(stack, a, b, floodConnections, seconds);
    const options: MeasureOptions = {
      cluster: false,
      seconds,
      connections: floodConnections,
      intervalMs: Number(values.interval),
      floodRetryAfter: values.flood,
      env,
      serverDynamicConfig: [],
    };
    const phases: PhaseResult[] = [];
    for (const which of ['b-alone', 'flood'] as const) {
      await settle(stack);
      phases.push(await phase(stack, a, b, which, 'on', options));
    }
    const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}`;
    const settings = values.env.length ? ` Settings: ${values.env.join(', ')}.` : '';
    const header = `Machine: ${machine}. The embedded stack on the service's defaults.${settings} One organization at ${connections} connections; A floods over ${floodConnections} and ${values.flood} Retry-After; B sends each kind every ${values.interval} ms; ${seconds} s a phase.`;
    const md = markdown(header, raw, lones, slack, phases);
    console.log(`\n${md}`);
    const dir = path.join(__dirname, 'results');
    await fs.mkdir(dir, { recursive: true });
    const stamp = `${new Date().toISOString().replace(/[:.]/g, '-')}-admission`;
    await fs.writeFile(
      path.join(dir, `${stamp}.json`),
      `${JSON.stringify({ kind: 'admission', seconds, connections, floodConnections, env: values.env, raw, lones, slack, phases }, null, 2)}\n`,
    );
    await fs.writeFile(path.join(dir, `${stamp}.md`), md);
    const lost =
      lones.reduce((n, l) => n + l.ackedButMissing, 0) +
      slack.ackedWithoutWorkflow +
      phases.reduce((n, r) => n + (r.a?.lost ?? 0) + Object.values(r.b ?? {}).reduce((m, k) => m + k.unprocessed, 0), 0);
    return lost === 0 ? 0 : 1;
  } finally {
    await stack.stop();
  }
}
