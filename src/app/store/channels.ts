/**
 * Postgres notifications for one process: a connection of its own LISTENs on the channels its
 * subscribers name, and each NOTIFY on them (from any process, committed) reaches them within
 * milliseconds. Until that connection is up, and whenever it is lost, `listening` is false and
 * every subscriber is told to `reset`: a notification may have been missed, so nothing cached on
 * the strength of them can be trusted. The connection is opened again, with backoff.
 */
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

export interface ChannelSubscriber {
  notified(payload: string): void;
  /** The connection was lost or (re)opened: notifications may have been missed. */
  reset(): void;
}

export interface ChannelSubscription {
  /** Whether a notification on the channel would reach the subscriber now. */
  readonly listening: boolean;
  unsubscribe(): void;
}

export interface Channels {
  subscribe(channel: string, subscriber: ChannelSubscriber): ChannelSubscription;
  close(): Promise<void>;
}

const FIRST_RETRY_MS = 1000;
const LAST_RETRY_MS = 30_000;

export function createChannels(url: string): Channels {
  const subscribers = new Map<string, Set<ChannelSubscriber>>();
  const listened = new Set<string>();
  // Named so an operator (or a test) can tell this connection in pg_stat_activity.
  const applicationName = `den-channels-${randomBytes(4).toString('hex')}`;
  let client: Client | undefined;
  let connecting = false;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let delay = FIRST_RETRY_MS;

  const resetAll = () => subscribers.forEach((set) => set.forEach((s) => s.reset()));
  const schedule = () => {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      void connect();
    }, delay);
    retry.unref();
    delay = Math.min(delay * 2, LAST_RETRY_MS);
  };
  const lost = (c: Client) => {
    if (client !== c) return;
    client = undefined;
    listened.clear();
    resetAll();
    c.end().catch(() => undefined);
    schedule();
  };
  const listen = async (c: Client, channel: string) => {
    await c.query(`LISTEN ${c.escapeIdentifier(channel)}`);
    if (client === c) listened.add(channel);
  };
  async function connect(): Promise<void> {
    if (closed || connecting || client) return;
    connecting = true;
    const c = new Client({ connectionString: url, connectionTimeoutMillis: 3000, keepAlive: true, application_name: applicationName });
    c.on('error', () => lost(c));
    c.on('end', () => lost(c));
    c.on('notification', (message) => subscribers.get(message.channel)?.forEach((s) => s.notified(message.payload ?? '')));
    try {
      await c.connect();
      client = c;
      for (const channel of subscribers.keys()) await listen(c, channel);
      delay = FIRST_RETRY_MS;
      resetAll();
    } catch {
      if (client === c) lost(c);
      else {
        c.end().catch(() => undefined);
        schedule();
      }
    } finally {
      connecting = false;
    }
  }

  return {
    subscribe(channel, subscriber) {
      const set = subscribers.get(channel) ?? new Set();
      set.add(subscriber);
      subscribers.set(channel, set);
      if (client && !listened.has(channel)) void listen(client, channel).catch(() => client && lost(client));
      else void connect();
      return {
        get listening() {
          return client !== undefined && listened.has(channel);
        },
        unsubscribe: () => void set.delete(subscriber),
      };
    },
    async close() {
      closed = true;
      clearTimeout(retry);
      const c = client;
      client = undefined;
      listened.clear();
      await c?.end().catch(() => undefined);
    },
  };
}
