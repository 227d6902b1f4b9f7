/**
 * Uploads a test writes by hand: the headers go out at once, the body only as the test writes it,
 * so a test can hold a body open, trickle it, or stop it, and still read the answer whenever the
 * server gives it (possibly before the body is sent).
 */
import http from 'node:http';

export interface Upload {
  response: Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>;
  request: http.ClientRequest;
}

/** A POST to `url` + `path`, from `localAddress` when given (127.0.0.0/8 is all loopback on Linux). */
export function startUpload(url: string, path: string, headers: Record<string, string | number>, localAddress?: string): Upload {
  const { hostname, port } = new URL(url);
  const request = http.request({ host: hostname, port, method: 'POST', path, headers, ...(localAddress ? { localAddress } : {}) });
  const response = new Promise<Awaited<Upload['response']>>((resolve, reject) => {
    request.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    request.on('error', reject);
  });
  // A refused or cut-off upload ends in a closed socket once the answer is read; not a failure.
  response.catch(() => {});
  request.on('error', () => {});
  request.flushHeaders();
  return { request, response };
}
