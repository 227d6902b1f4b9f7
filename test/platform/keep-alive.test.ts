/**
 * Idle keep-alive connections behind a load balancer: the API must keep an idle connection open
 * longer than the balancer does, or the balancer reuses one the API just closed and answers 502.
 * Apart from that, a request's headers and the whole request have bounds of their own, and the
 * process takes at most HTTP_MAX_CONNECTIONS connections.
 */
import net from 'node:net';
import { startTestStack, type TestStack } from '../harness/stack';

/** One raw connection: requests are written by hand so the test sees exactly which socket serves them. */
function rawConnection(url: string) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  let buffer = '';
  let closed = false;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (buffer += chunk));
  socket.on('close', () => (closed = true));
  return {
    socket,
    isClosed: () => closed,
    /** Sends GET /health and resolves with the status line of its answer. */
    async get(): Promise<string> {
      buffer = '';
      socket.write(`GET /health HTTP/1.1\r\nHost: ${hostname}\r\nConnection: keep-alive\r\n\r\n`);
      const deadline = Date.now() + 5000;
      while (!/\r\n\r\n[\s\S]*\}/.test(buffer)) {
        if (closed) throw new Error('the connection closed before the answer');
        if (Date.now() > deadline) throw new Error(`no answer within 5 s: ${JSON.stringify(buffer)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return buffer.split('\r\n')[0]!;
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('keep-alive', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack();
  });
  afterAll(() => stack?.stop());

  it('defaults above common load-balancer idle timeouts, with headers and request bounds of their own', () => {
    expect(stack.config.http.keepAliveTimeoutMs).toBe(65_000);
    expect(stack.http.server.keepAliveTimeout).toBe(65_000);
    expect(stack.http.server.headersTimeout).toBe(10_000);
    expect(stack.http.server.requestTimeout).toBe(60_000);
    expect(stack.http.server.maxConnections).toBe(10_000);
  });

  it('serves a second request on a connection left idle for 6 s (longer than the old 5 s)', async () => {
    const connection = rawConnection(stack.url);
    try {
      expect(await connection.get()).toBe('HTTP/1.1 200 OK');
      await sleep(6000);
      expect(connection.isClosed()).toBe(false);
      expect(await connection.get()).toBe('HTTP/1.1 200 OK');
    } finally {
      connection.socket.destroy();
    }
  }, 20_000);
});

describe('HTTP_KEEP_ALIVE_TIMEOUT', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { HTTP_KEEP_ALIVE_TIMEOUT: '1s' } });
  });
  afterAll(() => stack?.stop());

  it('closes a connection idle for longer than the setting', async () => {
    const connection = rawConnection(stack.url);
    try {
      expect(await connection.get()).toBe('HTTP/1.1 200 OK');
      await sleep(2500);
      expect(connection.isClosed()).toBe(true);
    } finally {
      connection.socket.destroy();
    }
  }, 20_000);
});

describe('HTTP_HEADERS_TIMEOUT and HTTP_MAX_CONNECTIONS', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { HTTP_HEADERS_TIMEOUT: '1s', HTTP_REQUEST_TIMEOUT: '2s', HTTP_MAX_CONNECTIONS: '3' } });
  });
  afterAll(() => stack?.stop());

  it('serves the next request of a connection idle for longer than the headers timeout (idle time does not count)', async () => {
    const connection = rawConnection(stack.url);
    try {
      expect(await connection.get()).toBe('HTTP/1.1 200 OK');
      await sleep(2500);
      expect(await connection.get()).toBe('HTTP/1.1 200 OK');
    } finally {
      connection.socket.destroy();
    }
  }, 20_000);

  it('closes a connection whose headers trickle in past the headers timeout', async () => {
    const connection = rawConnection(stack.url);
    const { hostname } = new URL(stack.url);
    try {
      connection.socket.write(`GET /health HTTP/1.1\r\nHost: ${hostname}\r\n`);
      const started = Date.now();
      while (!connection.isClosed() && Date.now() - started < 5000) await sleep(50);
      expect(connection.isClosed()).toBe(true);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    } finally {
      connection.socket.destroy();
    }
  }, 20_000);

  it('closes a connection past the cap at once, and takes new ones again when one closes', async () => {
    const held = [rawConnection(stack.url), rawConnection(stack.url), rawConnection(stack.url)];
    try {
      for (const connection of held) expect(await connection.get()).toBe('HTTP/1.1 200 OK');
      const extra = rawConnection(stack.url);
      const started = Date.now();
      while (!extra.isClosed() && Date.now() - started < 5000) await sleep(20);
      expect(extra.isClosed()).toBe(true);
      held.pop()!.socket.destroy();
      await sleep(100);
      const next = rawConnection(stack.url);
      expect(await next.get()).toBe('HTTP/1.1 200 OK');
      next.socket.destroy();
    } finally {
      for (const connection of held) connection.socket.destroy();
    }
  }, 20_000);
});
