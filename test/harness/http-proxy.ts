/**
 * A loopback HTTP front of the API that answers chosen requests itself (a 429 with Retry-After,
 * say) and passes every other one through unchanged, for testing clients' answers to it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface InterceptedReply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

/** `intercept` sees each request (method, path) first; undefined lets it through to `target`. */
export async function startHttpProxy(target: string, intercept: (method: string, path: string) => InterceptedReply | undefined) {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const own = intercept(req.method ?? 'GET', req.url ?? '/');
      if (own) {
        res.writeHead(own.status, { 'content-type': 'application/json', ...own.headers });
        res.end(own.body === undefined ? '' : JSON.stringify(own.body));
        return;
      }
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter((e): e is [string, string] => typeof e[1] === 'string' && e[0] !== 'host'),
      );
      const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
      fetch(`${target}${req.url}`, { method: req.method, headers, body }).then(
        async (answer) => {
          res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
          res.end(Buffer.from(await answer.arrayBuffer()));
        },
        () => {
          res.writeHead(502);
          res.end();
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
