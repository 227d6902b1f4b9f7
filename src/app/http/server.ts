import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';

export interface HttpServer {
  server: http.Server;
  url: string;
  port: number;
  /** Stop accepting, let in-flight requests finish within graceMs, then cut the rest. */
  close(graceMs: number): Promise<void>;
}

/** The default idle keep-alive: above the 60 s idle timeout common load balancers use. */
const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 65_000;
/** How often Node checks open requests against the headers and request timeouts (its default is 30 s). */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/** HOST, PORT, HTTP_KEEP_ALIVE_TIMEOUT, HTTP_HEADERS_TIMEOUT, HTTP_REQUEST_TIMEOUT and HTTP_MAX_CONNECTIONS. */
export interface ListenOptions {
  host: string;
  port: number;
  keepAliveTimeoutMs?: number;
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  maxConnections?: number;
}

export async function listen(app: Koa<never> | Koa, options: ListenOptions): Promise<HttpServer> {
  const { host, port } = options;
  const server = http.createServer({ connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS }, app.callback());
  // A load balancer that reuses an idle upstream connection the API has just closed answers its
  // client 502, so the API keeps idle connections longer than the balancer does; shutdown closes
  // idle sockets itself (close below), so they never hold it up.
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
  // Counted from a request's first byte, not from the end of the previous one: a connection idle
  // for its whole keep-alive time still gets the full bound for its next request's headers
  // (test/platform/keep-alive.test.ts), so a client trickling headers is cut off early.
  server.headersTimeout = options.headersTimeoutMs ?? 10_000;
  server.requestTimeout = Math.max(options.requestTimeoutMs ?? 60_000, server.headersTimeout);
  // Past the cap a new connection is closed at once, before it costs a parser or a request.
  if (options.maxConnections !== undefined) server.maxConnections = options.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closing: Promise<void> | undefined;
  return {
    server,
    port: address.port,
    url: `http://${shownHost}:${address.port}`,
    close: (graceMs) =>
      (closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), graceMs);
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      })),
  };
}
