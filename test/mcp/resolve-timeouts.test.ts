/**
 * MCP resolve's time bounds: the whole call answers within about 10 s even when every
 * candidate hangs, and never waits forever for Temporal or a worker (503 instead).
 */
import { createTestOrg, type TestMember } from '../harness/identity';
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

