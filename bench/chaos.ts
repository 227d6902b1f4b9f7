/**
 * `npm run chaos`: fault injection under steady signed load, bounded in time (~2 minutes).
 *
 *   1. kill -9 the Temporal dev server for 10 s, then restart it;
 *   2. kill -9 the worker, then restart it;
 *   3. stop Postgres for 5 s, then start it;
 *   4. Postgres read-only for 30 s (it answers reads and refuses writes, as after a failover);
 *   5. an operator cancels 10 live runs (as the Web UI does).
 *
 * Asserts: while a dependency is down, requests that need it get 503 (never 2xx) and /ready is
 * 503; the API recovers without being restarted; every acked request is durable afterwards;
 * runs in flight survive and their liveness timers still fire. Exits non-zero otherwise.
 */
import { ping } from '../workflows/ping';
import { randomUUID } from 'node:crypto';
import { signGithubPayload } from '../src/github/signature';
import { createSlackConnection } from '../src/slack/connections';
import { signSlackRequest } from '../src/slack/signature';
import { githubDeliveryWorkflowId } from '../src/github/contract';
import { runWorkflowId } from '../src/runs/contract';
import { slackEventWorkflowId } from '../src/slack/contract';
import { sql } from 'kysely';
import { createTestOrg } from '../test/harness/identity';
import { ownedTarget } from '../test/harness/github';
import { findMissing } from './lib/load';
import { waitFor } from '../test/harness/wait';
import { startBenchStack } from './lib/stack';
import { exitWith } from './lib/exit';

type Kind = 'slack' | 'github' | 'run';
interface Sent {
  kind: Kind;
  id: string;
  sentAt: number;
  answeredAt: number;
  status: number;
}

const RUN_ENV = { RUN_LEASE_TIMEOUT: '15s', RUN_RETRY_WINDOW: '5s', RUN_MAX_ATTEMPTS: '2' };

async function main(): Promise<number> {
  const stack = await startBenchStack({ apiEnv: RUN_ENV, workerEnv: RUN_ENV });
  const problems: string[] = [];
  const rows: string[] = [];
  try {
    const org = await createTestOrg(stack.database.db, 'chaos');
    const slackSecret = randomUUID();
    const { connectionId } = await createSlackConnection(
      { db: stack.database.db, secretKey: Buffer.from(stack.env.SECRET_KEY!, 'hex') },
      {
        organizationId: org.organizationId,
        teamId: 'TCHAOS0001',
        apiAppId: 'ACHAOS0001',
        signingSecret: slackSecret,
      },
    );
    // The pushes' repository has a target: a push no target takes is answered 200 and not queued.
    await ownedTarget(stack.database.db, {
      organizationId: org.organizationId,
      installationId: 1,
      repositoryFullName: 'chaos/repo',
      repositoryId: 1,
    });
    const apiPid = stack.api.pid;
    const api = stack.api.url!;

    const send = async (kind: Kind): Promise<Sent> => {
      const sentAt = Date.now();
      const id = kind === 'github' ? randomUUID() : kind === 'slack' ? `Ev${randomUUID().replace(/-/g, '')}` : `chaos-${randomUUID()}`;
      let request: { path: string; headers: Record<string, string>; body: string };
      if (kind === 'slack') {
        const body = JSON.stringify({
          type: 'event_callback',
          team_id: 'TCHAOS0001',
          api_app_id: 'ACHAOS0001',
          event_id: id,
          event: { type: 'app_mention', user: `U${sentAt}`, channel: 'CCHAOS', ts: `${sentAt / 1000}`, text: 'hi' },
        });
        const ts = Math.floor(sentAt / 1000);
        request = {
          path: `/v1/integrations/slack/${connectionId}/events`,
          headers: { 'x-slack-request-timestamp': String(ts), 'x-slack-signature': signSlackRequest(slackSecret, ts, body) },
          body,
        };
      } else if (kind === 'github') {
        // Each delivery its own head: the same body under another delivery id is refused as a replay.
        const body = JSON.stringify({
          ref: 'refs/heads/main',
          after: id.replace(/-/g, '').padEnd(40, '0'),
          installation: { id: 1 },
          repository: { id: 1, full_name: 'chaos/repo' },
        });
        request = {
          path: '/v1/webhooks/connectors/github',
          headers: {
            'x-github-event': 'push',
            'x-github-delivery': id,
            'x-hub-signature-256': signGithubPayload(stack.secrets.github, body),
          },
          body,
        };
      } else {
        request = {
          path: `/v1/automation-runs/${id}/events`,
          headers: { 'x-api-key': org.owner.apiKey },
          body: JSON.stringify({ attempt: 1, sequence: 1, type: 'user', payload: {}, createdAt: sentAt }),
        };
      }
      const res = await fetch(`${api}${request.path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...request.headers },
        body: request.body,
        signal: AbortSignal.timeout(10_000),
      }).catch(() => undefined);
      return { kind, id, sentAt, answeredAt: Date.now(), status: res?.status ?? 0 };
    };

    // Steady load: three loops, one per kind, until stopped.
    const sent: Sent[] = [];
    let loading = true;
    const loops = (['slack', 'github', 'run'] as Kind[]).map(async (kind) => {
      while (loading) {
        sent.push(await send(kind));
        // Steady, not saturating: chaos checks correctness; throughput is the bench's job.
        await new Promise((r) => setTimeout(r, 150));
      }
    });

    // Runs in flight before the faults: they heartbeat once and then go silent, so their lease
    // timers must fire after the faults (awaiting_retry, then failed/lease_lost).
    const inFlightRuns = Array.from({ length: 3 }, () => `chaos-live-${randomUUID()}`);
    for (const id of inFlightRuns) {
      await fetch(`${api}/v1/automation-runs/${id}/heartbeat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': org.owner.apiKey },
        body: JSON.stringify({ attempt: 1 }),
      });
    }
    await new Promise((r) => setTimeout(r, 3000));

    const readyStatus = async () => (await fetch(`${api}/ready`).catch(() => undefined))?.status ?? 0;
    const window = (from: number, to: number, kinds: Kind[]) =>
      sent.filter((s) => s.sentAt >= from && s.sentAt < to && kinds.includes(s.kind));
    const counts = (list: Sent[]) =>
      Object.entries(list.reduce<Record<string, number>>((m, s) => ((m[s.status] = (m[s.status] ?? 0) + 1), m), {}))
        .map(([k, v]) => `${k}×${v}`)
        .join(' ');
    /** From `from` until the first request sent after it was acked. */
    const recoveryMs = async (from: number, kinds: Kind[]) => {
      const firstOk = () => sent.find((s) => s.sentAt >= from && kinds.includes(s.kind) && s.status >= 200 && s.status < 300);
      await waitFor(async () => firstOk() !== undefined, 60_000, { intervalMs: 100 });
      return firstOk()!.sentAt - from;
    };

    // 1. Temporal: kill -9 for 10 s.
    {
      await stack.killTemporal();
      const downAt = Date.now();
      await new Promise((r) => setTimeout(r, 1500));
      const ready = await readyStatus();
      await new Promise((r) => setTimeout(r, 8500));
      const restartAt = Date.now();
      await stack.startTemporal();
      const recoverMs = await recoveryMs(restartAt, ['slack', 'github', 'run']);
      const during = window(downAt, restartAt, ['slack', 'github', 'run']);
      // A request still waiting when Temporal is back may be acked then, rightly: what must never
      // happen is an ack given while Temporal was down.
      const acked = during.filter((s) => s.status >= 200 && s.status < 300 && s.answeredAt < restartAt);
      if (acked.length > 0) problems.push(`temporal down: ${acked.length} requests answered 2xx while it was down`);
      if (ready !== 503) problems.push(`temporal down: /ready answered ${ready}`);
      if (during.length === 0) problems.push('temporal down: no requests were sent during the fault');
      rows.push(
        `| kill -9 Temporal 10 s | ${during.length} | ${counts(during)} | /ready ${ready} | ${(recoverMs / 1000).toFixed(1)} s from restart to the first ack |`,
      );
    }

    // 2. Worker: kill -9, restart. Temporal holds the work, so acks continue; the restarted
    //    worker must pick up what queued meanwhile.
    {
      await stack.worker.kill('SIGKILL');
      const downAt = Date.now();
      await new Promise((r) => setTimeout(r, 5000));
      const restartAt = Date.now();
      stack.worker.start();
      // Slack and GitHub acks need only Temporal. A run event is an Update the run's validator
      // answers, so with no worker it gets 503 (retry), never an ack.
      const during = window(downAt, restartAt, ['slack', 'github']);
      const runsDuring = window(downAt, restartAt, ['run']);
      // One probe workflow, queued behind whatever piled up while no worker ran.
      await stack.temporal.client.workflow.execute(ping, {
        taskQueue: 'bench',
        workflowId: `ping/chaos-probe-${randomUUID()}`,
        args: ['x'],
        workflowExecutionTimeout: '90s',
      });
      const recoverMs = Date.now() - restartAt;
      const failedDuring = during.filter((s) => s.status < 200 || s.status >= 300);
      if (failedDuring.length > 0)
        problems.push(`worker down: ${failedDuring.length} Slack/GitHub requests were not acked (Temporal was up)`);
      const runUnexpected = runsDuring.filter((s) => s.status !== 503 && (s.status < 200 || s.status >= 300));
      if (runUnexpected.length > 0) problems.push(`worker down: run events answered ${counts(runUnexpected)} (expected 2xx or 503)`);
      rows.push(
        `| kill -9 worker, restart after 5 s | ${during.length + runsDuring.length} | Slack/GitHub ${counts(during)}; run events ${counts(runsDuring) || 'none sent'} | ` +
          `Slack/GitHub acks continue (Temporal holds the work); run events 503 until a worker answers | ${(recoverMs / 1000).toFixed(1)} s from restart until a new workflow completes |`,
      );
    }

    // 3. Postgres down for 5 s: routes that need it (API-key auth, the Slack installation
    //    lookup) answer 503; the GitHub route keeps acking (Temporal holds the delivery, and its
    //    replay check is skipped while Postgres cannot record the body digest).
    {
      await stack.stopPostgres();
      const downAt = Date.now();
      await new Promise((r) => setTimeout(r, 1000));
      const ready = await readyStatus();
      await new Promise((r) => setTimeout(r, 4000));
      const restartAt = Date.now();
      await stack.startPostgres();
      const recoverMs = await recoveryMs(restartAt, ['slack', 'run']);
      const during = window(downAt, restartAt, ['slack', 'run']);
      const acked = during.filter((s) => s.status >= 200 && s.status < 300);
      if (acked.length > 0) problems.push(`postgres down: ${acked.length} requests that need it answered 2xx`);
      if (ready !== 503) problems.push(`postgres down: /ready answered ${ready}`);
      if (during.length === 0) problems.push('postgres down: no requests were sent during the fault');
      const github = window(downAt, restartAt, ['github']);
      rows.push(
        `| stop Postgres 5 s | ${during.length} (+${github.length} GitHub) | ${counts(during)} (GitHub: ${counts(github)}) | /ready ${ready} | ${(recoverMs / 1000).toFixed(1)} s from restart to the first ack |`,
      );
    }

    // 4. Postgres read-only for 30 s: reads answer, writes are refused (SQLSTATE 25006), as after
    //    a failover to a replica. Acks continue (Temporal holds the work); every acked run event
    //    must reach Postgres once writes work again.
    let readOnlyRuns: Sent[] = [];
    {
      const setReadOnly = async (on: boolean) => {
        await sql
          .raw(on ? 'ALTER SYSTEM SET default_transaction_read_only = on' : 'ALTER SYSTEM RESET default_transaction_read_only')
          .execute(stack.database.db);
        await sql`SELECT pg_reload_conf()`.execute(stack.database.db);
      };
      await setReadOnly(true);
      const downAt = Date.now();
      await new Promise((r) => setTimeout(r, 30_000));
      const restoreAt = Date.now();
      await setReadOnly(false);
      const during = window(downAt, restoreAt, ['slack', 'github', 'run']);
      readOnlyRuns = during.filter((s) => s.kind === 'run' && s.status >= 200 && s.status < 300);
      if (during.length === 0) problems.push('postgres read-only: no requests were sent during the fault');
      const persistedAfterMs = await (async () => {
        const started = Date.now();
        await waitFor(
          async () => {
            for (const run of readOnlyRuns) {
              const res = await fetch(`${api}/v1/automation-runs/${run.id}/events`, { headers: { 'x-api-key': org.owner.apiKey } });
              if (res.status !== 200 || ((await res.json()) as { events: unknown[] }).events.length === 0) return false;
            }
            return true;
          },
          90_000,
          { intervalMs: 1000 },
        );
        return Date.now() - started;
      })().catch(() => {
        problems.push('postgres read-only: acked run events did not reach Postgres within 90 s of writes returning');
        return NaN;
      });
      rows.push(
        `| Postgres read-only 30 s | ${during.length} | ${counts(during)} | reads answer, writes refused | ${(persistedAfterMs / 1000).toFixed(1)} s until every acked run event was persisted |`,
      );
    }

    // 5. An operator cancels 10 live runs, as the Web UI does: each closes `cancelled` with its
    //    row, and no workflow task fails.
    {
      const live = Array.from({ length: 10 }, () => `chaos-cancel-${randomUUID()}`);
      for (const id of live) {
        await fetch(`${api}/v1/automation-runs/${id}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': org.owner.apiKey },
          body: JSON.stringify({ attempt: 1, sequence: 1, type: 'user', payload: { text: 'cancel me' }, createdAt: Date.now() }),
        });
      }
      const cancelAt = Date.now();
      await Promise.all(live.map((id) => stack.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, id)).cancel()));
      const closed = await Promise.all(
        live.map(async (id) => {
          const handle = stack.temporal.client.workflow.getHandle(runWorkflowId(org.organizationId, id));
          const result = (await Promise.race([handle.result(), new Promise((r) => setTimeout(() => r(undefined), 30_000))])) as
            { status?: string } | undefined;
          const failures = ((await handle.fetchHistory()).events ?? []).filter((e) => e.workflowTaskFailedEventAttributes).length;
          const row = await fetch(`${api}/v1/automation-runs/${id}`, { headers: { 'x-api-key': org.owner.apiKey } }).then(
            (r) => r.json() as Promise<{ status?: string }>,
          );
          return result?.status === 'cancelled' && row.status === 'cancelled' && failures === 0;
        }),
      );
      const stuck = closed.filter((ok) => !ok).length;
      if (stuck > 0) problems.push(`operator cancel: ${stuck} of 10 runs did not close cancelled cleanly`);
      rows.push(
        `| operator cancels 10 live runs | 10 | cancelled×${10 - stuck}${stuck ? ` stuck×${stuck}` : ''} | — | ${((Date.now() - cancelAt) / 1000).toFixed(1)} s until all closed, rows cancelled, 0 workflow-task failures |`,
      );
    }

    loading = false;
    await Promise.all(loops);

    if (stack.api.pid !== apiPid || !stack.api.alive()) problems.push('the API process was restarted or died');

    // Every acked request is durable.
    const acked = sent.filter((s) => s.status >= 200 && s.status < 300);
    const workflowOf = (s: Sent) =>
      s.kind === 'slack'
        ? slackEventWorkflowId(connectionId, s.id)
        : s.kind === 'github'
          ? githubDeliveryWorkflowId(s.id)
          : runWorkflowId(org.organizationId, s.id);
    const byId = new Map(acked.map((s) => [workflowOf(s), s]));
    const missing = await findMissing([...byId.keys()], async (id) => {
      await stack.temporal.client.workflow.getHandle(id).describe();
      return true;
    });
    if (missing.length > 0) problems.push(`${missing.length} acked requests are not in Temporal`);

    // In-flight runs: their lease timers still fire after the faults.
    const leaseFired = await waitFor(
      async () => {
        for (const id of inFlightRuns) {
          const res = await fetch(`${api}/v1/automation-runs/${id}`, { headers: { 'x-api-key': org.owner.apiKey } });
          const summary = (await res.json()) as { status?: string };
          if (!['awaiting_retry', 'failed'].includes(summary.status ?? '')) return false;
        }
        return true;
      },
      90_000,
      { intervalMs: 1000 },
    ).then(
      () => true,
      () => false,
    );
    if (!leaseFired) problems.push('runs in flight did not reach awaiting_retry/failed after the faults');

    console.log('\n| fault | requests during | statuses | readiness | recovery |\n|---|---|---|---|---|');
    for (const row of rows) console.log(row);
    console.log(
      `\nrequests sent: ${sent.length}, acked: ${acked.length}, acked-but-lost: ${missing.length}; run events acked while Postgres was read-only: ${readOnlyRuns.length}`,
    );
    console.log(
      `API restarted: ${stack.api.pid !== apiPid ? 'yes' : 'no'}; in-flight runs' lease timers fired: ${leaseFired ? 'yes' : 'no'}`,
    );
    for (const problem of problems) console.log(`FAIL: ${problem}`);
    return problems.length === 0 ? 0 : 1;
  } catch (error) {
    console.error(`worker output (tail):\n${stack.worker.output.slice(-3000)}`);
    throw error;
  } finally {
    await stack.stop().catch(() => undefined);
  }
}

exitWith(main());
