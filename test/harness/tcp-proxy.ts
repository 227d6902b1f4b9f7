/**
 * A loopback TCP proxy in front of a real server, for outages of one client only: `cut()` drops
 * every connection and refuses new ones (the client sees its dependency go away), `restore()`
 * lets them through again, and `delay(ms)` holds every chunk that long in each direction (the
 * client sees its dependency answer slowly; bytes keep their order). The server itself keeps
 * serving everyone else.
 */
import net from 'node:net';

export interface TcpProxy {
  port: number;
  cut(): void;
  restore(): void;
  /** From now on, every chunk waits this long before it is passed on (0: at once). */
  delay(ms: number): void;
  close(): Promise<void>;
}

/** Passes `from`'s chunks to `to`, each after the proxy's current delay, never ahead of an earlier one. */
function relay(from: net.Socket, to: net.Socket, delayMs: () => number): void {
  let last = 0;
  from.on('data', (chunk: Buffer) => {
    const wait = delayMs();
    if (wait === 0 && last <= Date.now()) return void to.write(chunk);
    const at = Math.max(Date.now() + wait, last);
    last = at;
    setTimeout(() => to.writable && to.write(chunk), at - Date.now());
  });
  from.on('end', () => setTimeout(() => to.end(), Math.max(0, last - Date.now())));
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let open = true;
  let delayMs = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    if (!open) return client.destroy();
    const upstream = net.connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    relay(client, upstream, () => delayMs);
    relay(upstream, client, () => delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      open = false;
      for (const socket of sockets) socket.destroy();
    },
    restore() {
      open = true;
    },
    delay(ms) {
      delayMs = ms;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
