/**
 * Closing the Temporal client while the SDK's gRPC retry of a call is on its timer: that timer
 * would call into a closed channel and throw out of everyone's reach, ending the process. The
 * client's close() schedules no more retries and waits for those already scheduled. A child
 * process, so that such a throw ends it (and not the test runner).
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

const root = path.join(__dirname, '..', '..');

/** A loopback port nothing listens on: every call there fails UNAVAILABLE, which the SDK retries. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

it('closes with a gRPC retry pending without a throw from its timer', async () => {
  const port = await closedPort();
  const script = `
    const { createTemporalClient } = require(${JSON.stringify(path.join(root, 'src', 'app', 'temporal', 'client.ts'))});
    const temporal = createTemporalClient({ address: '127.0.0.1:${port}', namespace: 'default', taskQueue: 'close-test' });
    // Not through temporalCall: nothing tracks it, as with any call a caller stopped waiting for.
    temporal.connection.workflowService.getSystemInfo({}).catch(() => undefined);
    setTimeout(async () => {
      await temporal.close();
      setTimeout(() => console.log('closed cleanly'), 2000);
    }, 300);
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--require', 'tsx/cjs', '-e', script], { cwd: root, timeout: 30_000 });
  expect(stdout.trim()).toBe('closed cleanly');
}, 40_000);
