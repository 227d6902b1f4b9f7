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

export async function listen(app: Koa<never> | Koa, host: string, port: number): Promise<HttpServer> {
  const server = http.createServer(app.callback());
  // Slack and GitHub keep connections alive; don't let idle sockets block shutdown.
  server.keepAliveTimeout = 5000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 60_000;
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
