/**
 * A deliberately dumb HTTP/1.1 client over a raw socket, so the campaign can send what real
 * clients refuse to: duplicate headers, odd header values, invalid UTF-8, lying lengths.
 * Loopback only.
 */
import net from 'node:net';

export interface RawResponse {
  status: number;
  headers: string;
  body: Buffer;
}

export function rawRequest(options: {
  port: number;
  method: string;
  path: string;
  headers: [string, string][];
  body?: Buffer;
  timeoutMs?: number;
}): Promise<RawResponse> {
  const body = options.body ?? Buffer.alloc(0);
  const head = [
    `${options.method} ${options.path} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Connection: close',
    `Content-Length: ${body.length}`,
    ...options.headers.map(([name, value]) => `${name}: ${value}`),
    '',
    '',
  ].join('\r\n');
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: options.port });
    const chunks: Buffer[] = [];
    socket.setTimeout(options.timeoutMs ?? 30_000, () => socket.destroy(new Error('timeout')));
    socket.on('connect', () => {
      socket.write(Buffer.from(head, 'latin1'));
      // The server may answer (413, 401) and close before it has read a large body.
      socket.write(body, () => undefined);
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    let failure: Error | undefined;
    // The server may answer and close while we are still writing (an oversized upload, a
    // request its parser refused): EPIPE/ECONNRESET then, and the answer is still readable.
    socket.on('error', (error: NodeJS.ErrnoException) => {
      failure = error;
    });
    socket.on('close', finish);
    let done = false;
    function finish() {
      if (done) return;
      done = true;
      const all = Buffer.concat(chunks);
      if (all.length === 0) return reject(failure ?? new Error('connection closed without an answer'));
      const split = all.indexOf('\r\n\r\n');
      const headText = all.subarray(0, split === -1 ? all.length : split).toString('latin1');
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(headText);
      if (!match) return reject(new Error(`no HTTP status line in ${JSON.stringify(headText.slice(0, 80))}`));
      resolve({ status: Number(match[1]), headers: headText, body: split === -1 ? Buffer.alloc(0) : all.subarray(split + 4) });
    }
  });
}
