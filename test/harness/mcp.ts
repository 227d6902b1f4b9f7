/**
 * MCP resolve test helpers. Every server here listens on loopback, and every outbound
 * connection the code under test makes is checked by a tripwire: tests (and the code they
 * exercise) must never reach beyond 127.0.0.0/8 and ::1, and must never ask real DNS.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import ipaddr from 'ipaddr.js';
import pg from 'pg';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { McpNetworkOverrides } from '../../src/mcp/network';
import type { WorkerHandle } from '../../src/app/temporal/worker';
import { testResolver } from './no-dns';
import { startTestStack, type TestStack } from './stack';
import { freePort } from './ports';

// ---------------------------------------------------------------------------------------
// No DNS, no traffic beyond loopback.

export { testResolver };

function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  if (!ipaddr.isValid(bare)) return false;
  const address = ipaddr.process(bare);
  return address.range() === 'loopback';
}

function connectTarget(args: unknown[]): { host: string; port: unknown } | undefined {
  let first = args[0];
  if (Array.isArray(first)) first = first[0];
  if (first && typeof first === 'object') {
    const o = first as { host?: string; port?: unknown; path?: string };
    if (o.path) return undefined; // a unix socket
    return { host: o.host ?? 'localhost', port: o.port };
  }
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    return { host: typeof args[1] === 'string' ? args[1] : 'localhost', port: first };
  }
  return undefined;
}

/**
 * Wraps `net.Socket.prototype.connect` for the whole test process (node's fetch, undici, the
 * MCP SDK and pg all end there): a connection to anything but loopback is never opened, and
 * is recorded so the test fails. Restore it in afterAll.
 */
export function installLoopbackTripwire(): { violations: string[]; restore(): void } {
  const violations: string[] = [];
  const original = net.Socket.prototype.connect;
  const guarded = function (this: net.Socket, ...args: unknown[]) {
    const target = connectTarget(args);
    if (target && !isLoopbackHost(target.host)) {
      violations.push(`${target.host}:${String(target.port)}`);
      process.nextTick(() => this.destroy(new Error(`test tripwire: refused a connection to ${target.host}`)));
      return this;
    }
    return (original as (...a: unknown[]) => net.Socket).apply(this, args);
  };
  net.Socket.prototype.connect = guarded as typeof original;
  return {
    violations,
    restore() {
      if (net.Socket.prototype.connect === (guarded as unknown)) net.Socket.prototype.connect = original;
    },
  };
}

// ---------------------------------------------------------------------------------------
// The app, with a worker whose probes use the test resolver.

export interface McpStack extends TestStack {
  mcpWorker: WorkerHandle;
}

export async function startMcpStack(options: { env?: Record<string, string>; network?: McpNetworkOverrides } = {}): Promise<McpStack> {
  // Never the system resolver in tests: see testResolver.
  const stack = await startTestStack({ env: options.env, worker: true, mcpNetwork: { resolve: testResolver(), ...options.network } });
  return Object.assign(stack, { mcpWorker: stack.worker! });
}

/** Records the text of every SQL statement this process sends to Postgres. Restore in afterAll. */
export function recordSql(): { statements: string[]; restore(): void } {
  const statements: string[] = [];
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0];
    statements.push(typeof first === 'string' ? first : String((first as { text?: string })?.text ?? ''));
    return original.apply(this, args);
  };
  return { statements, restore: () => void (proto.query = original) };
}

export const isWrite = (sql: string) => /^\s*(insert|update|delete|merge|upsert|create|alter|drop|truncate)\b/i.test(sql);

// ---------------------------------------------------------------------------------------
// Servers on loopback.

export interface RunningServer {
  port: number;
  origin: string;
  stop(): Promise<void>;
}

async function listenHttp(server: http.Server, port = 0): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return (server.address() as net.AddressInfo).port;
}

function closeHttp(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** `@modelcontextprotocol/server-everything` in Streamable HTTP mode, as a child process. */
export async function startEverythingServer(): Promise<RunningServer & { url: string }> {
  const port = await freePort();
  const entry = path.resolve(__dirname, '../../node_modules/@modelcontextprotocol/server-everything/dist/index.js');
  // It binds every interface: PORT is always set, and nothing but loopback ever talks to it.
  const child: ChildProcess = spawn(process.execPath, [entry, 'streamableHttp'], {
    env: { PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // Never outlive the test process, even if afterAll is not reached.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  child.once('exit', () => process.removeListener('exit', killOnExit));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server-everything did not start')), 15_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      if (/listening/i.test(chunk.toString())) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server-everything exited with ${code}`));
    });
  });
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}/mcp`,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

interface SeenRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** JSON-RPC methods in the body, for MCP POSTs. */
  rpc: string[];
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function rpcMethods(body: string): string[] {
  try {
    const parsed = JSON.parse(body) as unknown;
    const list = Array.isArray(parsed) ? parsed : [parsed];
    return list.map((m) => String((m as { method?: string })?.method ?? 'response'));
  } catch {
    return [];
  }
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** A small MCP server (SDK McpServer) with annotated tools. */
function buildMcpServer(): McpServer {
  const server = new McpServer({ name: 'den-test-server', version: '1.0.0' });
  server.registerTool(
    'lookup',
    { description: 'Looks something up', inputSchema: { q: z.string() }, annotations: { readOnlyHint: true, openWorldHint: false } },
    async ({ q }) => ({ content: [{ type: 'text', text: q }] }),
  );
  server.registerTool(
    'delete_everything',
    { description: 'Deletes', inputSchema: {}, annotations: { destructiveHint: true } },
    async () => ({ content: [{ type: 'text', text: 'gone' }] }),
  );
  return server;
}

async function handleMcp(req: http.IncomingMessage, res: http.ServerResponse, body: string) {
  // Stateless: a fresh server and transport per request (the SDK's documented pattern).
  const server = buildMcpServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body ? JSON.parse(body) : undefined);
}

/**
 * An in-process MCP server. `oauth` puts it behind a bearer challenge with RFC 9728 and
 * RFC 8414 metadata; `issuerMismatch` makes the authorization-server metadata name another
 * issuer, `resourceMismatch` makes the protected-resource metadata describe another resource. Every request is recorded in `seen`.
 */
export async function startTestMcpServer(
  options: { oauth?: boolean; issuerMismatch?: boolean; resourceMismatch?: boolean; validToken?: string } = {},
) {
  const seen: SeenRequest[] = [];
  let origin = '';
  const server = http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', origin);
      const body = req.method === 'POST' ? await readBody(req) : '';
      seen.push({ method: req.method ?? '', path: url.pathname, headers: req.headers, rpc: body ? rpcMethods(body) : [] });
      const resourceMetadataUrl = `${origin}/.well-known/oauth-protected-resource/mcp`;
      if (url.pathname === '/.well-known/oauth-protected-resource/mcp' && options.oauth) {
        return sendJson(res, 200, {
          resource: options.resourceMismatch ? `${origin}/some-other-api` : `${origin}/mcp`,
          authorization_servers: [origin],
          scopes_supported: ['files:read', 'files:write', 'offline_access'],
          bearer_methods_supported: ['header'],
        });
      }
      if (url.pathname === '/.well-known/oauth-authorization-server' && options.oauth) {
        return sendJson(res, 200, {
          issuer: options.issuerMismatch ? `${origin}/someone-else` : origin,
          authorization_endpoint: `${origin}/authorize`,
          token_endpoint: `${origin}/token`,
          registration_endpoint: `${origin}/register`,
          response_types_supported: ['code'],
          grant_types_supported: ['authorization_code', 'refresh_token'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['none', 'client_secret_basic'],
          scopes_supported: ['files:read', 'files:write', 'offline_access'],
          client_id_metadata_document_supported: true,
        });
      }
      if (url.pathname === '/mcp') {
        if (options.oauth && req.headers.authorization !== `Bearer ${options.validToken ?? 'valid-token'}`) {
          return sendJson(
            res,
            401,
            { error: 'invalid_token' },
            {
              'www-authenticate': `Bearer resource_metadata="${resourceMetadataUrl}", scope="files:read files:write"`,
            },
          );
        }
        if (req.method !== 'POST') return sendJson(res, 405, { error: 'method not allowed' });
        return handleMcp(req, res, body);
      }
      sendJson(res, 404, { error: 'not found' });
    })().catch(() => {
      if (!res.headersSent) sendJson(res, 500, { error: 'test server error' });
    });
  });
  const port = await listenHttp(server);
  origin = `http://127.0.0.1:${port}`;
  return { port, origin, url: `${origin}/mcp`, seen, stop: () => closeHttp(server) };
}

/** A legacy HTTP+SSE (protocol 2024-11-05) MCP server: GET /sse, then POST /messages. */
export async function startLegacySseServer() {
  const transports = new Map<string, SSEServerTransport>();
  const server = http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (url.pathname === '/sse' && req.method === 'GET') {
        const transport = new SSEServerTransport('/messages', res);
        transports.set(transport.sessionId, transport);
        res.on('close', () => transports.delete(transport.sessionId));
        await buildMcpServer().connect(transport);
        return;
      }
      if (url.pathname === '/messages' && req.method === 'POST') {
        const transport = transports.get(url.searchParams.get('sessionId') ?? '');
        if (!transport) return sendJson(res, 404, { error: 'no session' });
        await transport.handlePostMessage(req, res);
        return;
      }
      sendJson(res, 404, { error: 'not found' });
    })().catch(() => {
      if (!res.headersSent) sendJson(res, 500, { error: 'test server error' });
    });
  });
  const port = await listenHttp(server);
  return { port, origin: `http://127.0.0.1:${port}`, url: `http://127.0.0.1:${port}/sse`, stop: () => closeHttp(server) };
}

/** A web server that is not MCP: an HTML page at /, 404 for everything else. */
export async function startPlainServer() {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    if (req.url === '/' && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html><body>Hello</body></html>');
      return;
    }
    res.writeHead(404, { 'content-type': 'text/html' });
    res.end('<html><body>Not found</body></html>');
  });
  const port = await listenHttp(server);
  return { port, origin: `http://127.0.0.1:${port}`, seen, stop: () => closeHttp(server) };
}

/**
 * An HTTP server for guard tests: `/redirect?to=<url>&status=307`, `/chain/<n>` (n redirects
 * left), `/echo-headers`, `/big` (2 MiB), `/json`, `/hang` (headers never come),
 * `/drip` (an event stream that never says anything).
 */
export async function startUtilityServer() {
  const seen: SeenRequest[] = [];
  const server = http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const body = req.method === 'POST' ? await readBody(req) : '';
      seen.push({ method: req.method ?? '', path: url.pathname, headers: req.headers, rpc: body ? rpcMethods(body) : [] });
      if (url.pathname === '/redirect') {
        res.writeHead(Number(url.searchParams.get('status') ?? 302), { location: url.searchParams.get('to') ?? '/' });
        return res.end();
      }
      const chain = /^\/chain\/(\d+)$/.exec(url.pathname);
      if (chain) {
        const left = Number(chain[1]);
        if (left === 0) return sendJson(res, 200, { arrived: true });
        res.writeHead(302, { location: `/chain/${left - 1}` });
        return res.end();
      }
      if (url.pathname === '/echo-headers') return sendJson(res, 200, { method: req.method, headers: req.headers, body });
      if (url.pathname === '/big') {
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        for (let i = 0; i < 32; i++) res.write(chunk);
        return res.end();
      }
      if (url.pathname === '/json') return sendJson(res, 200, { ok: true });
      if (url.pathname === '/hang') return; // never answers
      if (url.pathname === '/drip') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const timer = setInterval(() => res.write(': still here\n\n'), 300);
        res.on('close', () => clearInterval(timer));
        return;
      }
      sendJson(res, 404, { error: 'not found' });
    })();
  });
  const port = await listenHttp(server);
  return { port, origin: `http://127.0.0.1:${port}`, seen, stop: () => closeHttp(server) };
}

/**
 * Counts TCP connections on 127.0.0.1:port and [::1]:port and closes each at once. Never on
 * the allowlist in the SSRF battery: any count above zero is a guard failure.
 */
export async function startCountingServer(): Promise<RunningServer & { connections(): number; reset(): void }> {
  let count = 0;
  const onConnection = (socket: net.Socket) => {
    count++;
    socket.destroy();
  };
  const v4 = net.createServer(onConnection);
  await new Promise<void>((resolve, reject) => {
    v4.once('error', reject);
    v4.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (v4.address() as net.AddressInfo).port;
  const v6 = net.createServer(onConnection);
  await new Promise<void>((resolve, reject) => {
    v6.once('error', reject);
    v6.listen(port, '::1', () => resolve());
  });
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    connections: () => count,
    reset: () => void (count = 0),
    stop: async () => {
      await Promise.all([v4, v6].map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    },
  };
}

/** Accepts connections and resets every one of them (RST), counting them. */
export async function startResettingServer() {
  let count = 0;
  const server = net.createServer((socket) => {
    count++;
    socket.once('data', () => socket.resetAndDestroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    connections: () => count,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Every MCP candidate hangs: `/mcp` answers 200 text/event-stream and then only drips comments
 * (so no header or idle timeout fires); anything else never answers at all.
 */
export async function startHangingServer() {
  const server = http.createServer((req, res) => {
    req.resume();
    if ((req.url ?? '').startsWith('/mcp')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write(': still thinking\n\n'), 500);
      res.on('close', () => clearInterval(timer));
    }
  });
  const port = await listenHttp(server);
  return { port, origin: `http://127.0.0.1:${port}`, stop: () => closeHttp(server) };
}

/**
 * An MCP server whose tools/list never ends: every page has `pageSize` tools and a next
 * cursor. `listCalls()` counts the tools/list requests it answered.
 */
export async function startPagedToolsServer(pageSize: number) {
  let calls = 0;
  const build = () => {
    const server = new Server({ name: 'paged', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async (request) => {
      calls++;
      const page = Number(request.params?.cursor ?? 0);
      return {
        tools: Array.from({ length: pageSize }, (_, i) => ({ name: `tool_${page}_${i}`, inputSchema: { type: 'object' as const } })),
        nextCursor: String(page + 1),
      };
    });
    return server;
  };
  const server = http.createServer((req, res) => {
    void (async () => {
      const body = req.method === 'POST' ? await readBody(req) : '';
      if (req.method !== 'POST') return sendJson(res, 405, { error: 'method not allowed' });
      const mcp = build();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => void transport.close());
      await mcp.connect(transport);
      await transport.handleRequest(req, res, JSON.parse(body));
    })().catch(() => {
      if (!res.headersSent) sendJson(res, 500, { error: 'test server error' });
    });
  });
  const port = await listenHttp(server);
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}/mcp`,
    listCalls: () => calls,
    stop: () => closeHttp(server),
  };
}
