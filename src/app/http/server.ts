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

export async function listen(
  app: Koa<never> | Koa,
  host: string,
  port: number,
  options: { keepAliveTimeoutMs?: number } = {},
): Promise<HttpServer> {
  const server = http.createServer(app.callback());
  // A load balancer that reuses an idle upstream connection the API has just closed answers its
  // client 502, so the API keeps idle connections longer than the balancer does; shutdown closes
  // idle sockets itself (close below), so they never hold it up.
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
  // Node requires the headers timeout above the keep-alive timeout, or a request that starts on a
  // connection near its idle limit is cut off mid-headers.
  server.headersTimeout = server.keepAliveTimeout + 5000;
  // Node refuses a whole-request bound below the headers bound.
  server.requestTimeout = Math.max(60_000, server.headersTimeout);
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
