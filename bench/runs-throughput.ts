/**
 * `npx tsx bench/runs-throughput.ts [-- --runs 20 --events 50 --concurrency 16 --seconds 60]`
 *
 * What the automation-run path sustains on this machine, over loopback, against a real stack of
 * separate processes (embedded Postgres and Temporal dev server, the API and a worker):
 * - signals/s: event reports answered 200 per second (each one an update-with-start the run accepted);
 * - events/s: events applied by the run workflows and persisted to automation_run_events per
 *   second, end to end (from the first report until the last row is written);
 * - heartbeats/s: heartbeat requests answered per second, almost all coalesced in the process;
 * - baseline: signalWithStart/s that the same Temporal server accepts from this process alone,
 *   to a task queue no worker polls (no API, no auth, no workflow work): the ceiling here.
 * Bounded by count (runs × events) and by time (--seconds).
 */
import { automationRun } from '../workflows/runs';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { WorkflowIdReusePolicy } from '@temporalio/client';
import { sql } from 'kysely';
import { runEventSignal, type RunWorkflowInput } from '../src/runs/contract';
import { createTestOrg } from '../test/harness/identity';
import { waitFor } from '../test/harness/wait';
import { startBenchStack } from './lib/stack';

interface Timing {
  completed: number;
  failed: number;
  statuses: Record<number, number>;
  seconds: number;
  p50: number;
  p99: number;
}

async function closedLoop(concurrency: number, deadline: number, next: () => (() => Promise<number>) | undefined): Promise<Timing> {
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  let failed = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let job = next(); job && Date.now() < deadline; job = next()) {
        const t = performance.now();
        const status = await job().catch(() => 0);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status === 200) latencies.push(performance.now() - t);
        else failed += 1;
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0);
  return { completed: latencies.length, failed, statuses, seconds: (performance.now() - started) / 1000, p50: at(0.5), p99: at(0.99) };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '20' },
      events: { type: 'string', default: '50' },
      concurrency: { type: 'string', default: '16' },
      seconds: { type: 'string', default: '60' },
      heartbeats: { type: 'string', default: '5000' },
    },
  });
  const runs = Number(values.runs);
  const eventsPerRun = Number(values.events);
  const concurrency = Number(values.concurrency);
  const deadline = Date.now() + Number(values.seconds) * 1000;

  const stack = await startBenchStack();
  try {
    const org = await createTestOrg(stack.database.db);
    const headers = { 'x-api-key': org.owner.apiKey, 'content-type': 'application/json' };
    const base = stack.api.url!;
    const post = (path: string, body: unknown) => async () =>
      (await fetch(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) }).then(async (r) => (await r.arrayBuffer(), r)))
        .status;

    // Warm-up: one run end to end (workflow code loaded, pools open).
    const warm = `bench-warm-${randomUUID()}`;
    await post(`/v1/automation-runs/${warm}/events`, { attempt: 1, sequence: 1, type: 'terminal', payload: {}, createdAt: Date.now() })();

    // 1. Event reports: `runs` runs, each with `eventsPerRun` events, sequences in order per run,
    //    the runs interleaved so up to `concurrency` requests are in flight.
    const runIds = Array.from({ length: runs }, () => `bench-${randomUUID()}`);
    const jobs: (() => Promise<number>)[] = [];
    for (let sequence = 1; sequence <= eventsPerRun; sequence++) {
      for (const id of runIds) {
        const type = sequence === eventsPerRun ? 'terminal' : 'assistant';
        jobs.push(
          post(`/v1/automation-runs/${id}/events`, {
            attempt: 1,
            sequence,
            type,
            payload: { text: `message ${sequence}` },
            createdAt: Date.now(),
          }),
        );
      }
    }
    let index = 0;
    const started = Date.now();
    const reports = await closedLoop(concurrency, deadline, () => jobs[index++]);
    const expected = reports.completed;
    const persistedCount = async () => {
      const row = await sql<{
        n: string;
      }>`SELECT count(*) AS n FROM automation_run_events WHERE organization_id = ${org.organizationId} AND run_id LIKE 'bench-%' AND run_id <> ${warm}`.execute(
        stack.database.db,
      );
      return Number(row.rows[0]!.n);
    };
    let persisted = 0;
    await waitFor(async () => (persisted = await persistedCount()) >= expected, Math.max(5_000, deadline - Date.now()), {
      intervalMs: 100,
    }).catch(() => undefined);
    const endToEnd = (Date.now() - started) / 1000;

    // 2. Heartbeats: many per (run, attempt), as runtimes send them; the API coalesces them.
    const hbRuns = Array.from({ length: 10 }, () => `bench-hb-${randomUUID()}`);
    let hb = 0;
    const heartbeatLimit = Number(values.heartbeats);
    const heartbeats = await closedLoop(concurrency, Date.now() + 30_000, () =>
      hb < heartbeatLimit ? post(`/v1/automation-runs/${hbRuns[hb++ % hbRuns.length]}/heartbeat`, { attempt: 1 }) : undefined,
    );
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const counter = (result: string) =>
      Number(new RegExp(`den_run_heartbeats_total\\{result="${result}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0);

    // 3. Baseline: Temporal alone, same server, same concurrency, same signal shape.
    const baseRuns = Array.from({ length: runs }, () => `bench-baseline-${randomUUID()}`);
    let b = 0;
    const baselineLimit = runs * eventsPerRun;
    const baseline = await closedLoop(concurrency, Date.now() + 30_000, () => {
      if (b >= baselineLimit) return undefined;
      const i = b++;
      return async () => {
        await stack.temporal.client.workflow.signalWithStart(automationRun, {
          workflowId: baseRuns[i % runs]!,
          taskQueue: 'bench-baseline-nobody-polls',
          // Nobody polls this queue: only the start + signal cost is measured, so the input is never read.
          args: [{} as RunWorkflowInput],
          workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
          signal: runEventSignal,
          signalArgs: [
            {
              attempt: 1,
              sequence: i + 1,
              type: 'assistant',
              payload: { text: `message ${i}` },
              createdAt: Date.now(),
              receivedAt: Date.now(),
            },
          ],
        });
        return 200;
      };
    });
    for (const id of baseRuns)
      await stack.temporal.client.workflow
        .getHandle(id)
        .terminate('bench baseline')
        .catch(() => undefined);

    const cpus = (await import('node:os')).cpus().length;
    console.log(`\nAutomation-run path on ${cpus} cores (loopback; API, worker, Temporal dev server and Postgres on this machine)`);
    console.log(`runs ${runs}, events per run ${eventsPerRun}, concurrency ${concurrency}`);
    console.log(`| measure | value |\n|---|---|`);
    console.log(`| event reports acked (signals) | ${reports.completed} in ${reports.seconds.toFixed(1)} s |`);
    console.log(`| **signals/s** | **${(reports.completed / reports.seconds).toFixed(0)}** |`);
    console.log(`| report latency p50 / p99 | ${reports.p50} ms / ${reports.p99} ms |`);
    console.log(`| non-200 answers | ${reports.failed} ${JSON.stringify(reports.statuses)} |`);
    console.log(`| events persisted, in order | ${persisted} of ${expected}, ${endToEnd.toFixed(1)} s from first report |`);
    console.log(`| **events/s (applied + persisted, end to end)** | **${(persisted / endToEnd).toFixed(0)}** |`);
    console.log(
      `| heartbeats answered | ${heartbeats.completed} in ${heartbeats.seconds.toFixed(1)} s = ${(heartbeats.completed / heartbeats.seconds).toFixed(0)}/s (p50 ${heartbeats.p50} ms) |`,
    );
    console.log(`| heartbeats forwarded / coalesced | ${counter('forwarded')} / ${counter('coalesced')} |`);
    console.log(
      `| baseline: raw signalWithStart to Temporal alone | ${(baseline.completed / baseline.seconds).toFixed(0)}/s (p50 ${baseline.p50} ms, p99 ${baseline.p99} ms) |`,
    );
  } finally {
    await stack.stop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
