import net from 'node:net';

/** A port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A port with nothing listening: for "dependency unreachable" tests. */
export function closedPort(): Promise<number> {
  return freePort();
}

/** Whether nothing listens on `port` of 127.0.0.1 right now. */
export function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** The first of `count` consecutive free ports (the cluster's API replicas take PORT, PORT+1, …). */
export async function freePortRange(count: number): Promise<number> {
  for (;;) {
    const base = await freePort();
    if (base + count < 65_536 && (await Promise.all(Array.from({ length: count }, (_, i) => isFree(base + i)))).every(Boolean)) return base;
  }
}
