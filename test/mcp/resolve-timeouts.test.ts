/**
 * MCP resolve's time bounds: the whole call answers within about 10 s even when every
 * candidate hangs, and never waits forever for Temporal or a worker (503 instead).
 */
import { randomUUID } from 'node:crypto';
import { pingWorkflowId } from '../../src/app/temporal/contract';
import { mcpTaskQueue } from '../../src/mcp/contract';
import { ping } from '../../workflows/ping';
import { createTestOrg, type TestMember } from '../harness/identity';
import { waitFor } from '../harness/wait';
import { closedPort } from '../harness/ports';
import { startTestStack, type TestStack } from '../harness/stack';
import { installLoopbackTripwire, startHangingServer, startMcpStack, type McpStack } from '../harness/mcp';

const PATH = '/v1/mcp-connections/resolve';

let tripwire: ReturnType<typeof installLoopbackTripwire>;
let hanging: Awaited<ReturnType<typeof startHangingServer>>;
let stack: McpStack;
let admin: TestMember;
const extraStacks: TestStack[] = [];

beforeAll(async () => {
  tripwire = installLoopbackTripwire();
  hanging = await startHangingServer();
  // The default MCP_PROBE_TIMEOUT (8 s): this is the bound the spec cares about.
  stack = await startMcpStack({ env: { MCP_PRIVATE_ALLOWLIST: hanging.origin } });
  admin = await (await createTestOrg(stack.services.database.db)).addMember('admin');
});

afterAll(async () => {
  for (const extra of extraStacks) await extra.stop();
  await stack?.stop();
  await hanging?.stop();
  tripwire.restore();
  expect(tripwire.violations).toEqual([]);
});

it('Temporal unreachable → 503, never an answer without a probe', async () => {
  const down = await startTestStack({ env: { TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`, MCP_PROBE_TIMEOUT: '1s' } });
  // Stopped in afterAll: the Temporal client keeps retrying briefly after the route gave up,
  // and closing its channel under a pending retry throws from a timer.
  extraStacks.push(down);
  const res = await down.request('POST', PATH, { headers: admin.headers, body: { query: 'acme' } });
  expect(res.status).toBe(503);
  expect(res.json).toEqual({ error: 'unavailable', dependency: 'temporal', message: expect.any(String) });
  expect(res.headers.get('retry-after')).toBe('5');
}, 20_000);

it('no worker on the task queue → 503 after the bounded wait, not a hang', async () => {
  const idle = await startTestStack({ env: { MCP_PROBE_TIMEOUT: '1s' } });
  extraStacks.push(idle);
  const started = Date.now();
  const res = await idle.request('POST', PATH, { headers: admin.headers, body: { query: 'acme' } });
  expect(res.status).toBe(503);
  expect(res.json.dependency).toBe('temporal');
  expect(Date.now() - started).toBeLessThan(8_000);
}, 20_000);

it('every candidate hangs → not_found within ~10 s, each candidate unreachable or unsupported', async () => {
  expect(stack.config.mcp.probeTimeoutMs).toBe(8_000);
  const started = Date.now();
  const res = await stack.request('POST', PATH, { headers: admin.headers, body: { query: hanging.origin } });
  const elapsed = Date.now() - started;
  expect(res.status).toBe(200);
  expect(res.json.resolution).toBe('not_found');
  expect(res.json.attempted).toEqual([`${hanging.origin}/`, `${hanging.origin}/mcp`]);
  // The root never sends headers; /mcp sends headers and then nothing useful.
  expect(res.json.reason).toContain(`${hanging.origin}/: unreachable:`);
  expect(res.json.reason).toContain(`${hanging.origin}/mcp: unsupported:`);
  expect(elapsed).toBeLessThan(10_500);
}, 20_000);

it('a backlog on the main task queue does not make probes wait: resolve runs on its own queue', async () => {
  const queue = `backlog-${randomUUID()}`;
  const temporal = stack.services.temporal.client;
  // 300 workflows wait on the main queue before any worker polls it.
  const backlog = await Promise.all(
    Array.from({ length: 300 }, () =>
      temporal.workflow.start(ping, { taskQueue: queue, workflowId: pingWorkflowId(randomUUID()), args: ['x'] }),
    ),
  );
  const busy = await startTestStack({ worker: true, env: { TEMPORAL_TASK_QUEUE: queue, MCP_PROBE_TIMEOUT: '2s' } });
  extraStacks.push(busy);
  const started = Date.now();
  const res = await busy.request('POST', PATH, { headers: admin.headers, body: { query: 'acme' } });
  const elapsed = Date.now() - started;
  expect(res.status).toBe(200);
  expect(res.json.resolution).toBe('not_found');
  expect(elapsed).toBeLessThan(8_000);
  // The backlog was still being worked off when the probe answered.
  const done = await Promise.all(backlog.map((handle) => handle.describe().then((d) => d.status.name === 'COMPLETED')));
  expect(done.filter(Boolean).length).toBeLessThan(300);
  // Visibility is eventually consistent: wait for the probe workflow to be listed on its queue.
  await waitFor(
    async () => {
      let onOwnQueue = 0;
      for await (const _ of temporal.workflow.list({ query: `WorkflowType = 'mcpResolve' AND TaskQueue = '${mcpTaskQueue(queue)}'` }))
        onOwnQueue += 1;
      return onOwnQueue === 1;
    },
    10_000,
    { what: 'the resolve workflow on the MCP task queue' },
  );
}, 60_000);
