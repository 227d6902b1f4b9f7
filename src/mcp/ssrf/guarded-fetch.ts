/**
 * The SSRF-guarded fetch for MCP discovery (behaviour notes, "SSRF guard"). Every outbound
 * request of a probe — the MCP handshake, each redirect hop, each metadata document — goes
 * through one instance of this, and it refuses before any connection is opened:
 *
 *  - https only (plain http only for allowlisted origins, or private targets under the flag);
 *    no user info in the URL;
 *  - IP-literal hosts are judged directly (undici skips `lookup` for literals); names are
 *    resolved with a timeout, and a single blocked address refuses the whole name;
 *  - the connection goes to the address that was judged (pinned, so a second DNS answer can't
 *    rebind it), and the connected socket's `remoteAddress` is judged again before use;
 *  - redirects are followed by hand, at most 5, each hop re-validated, never https → http,
 *    credential headers dropped when the origin changes;
 *  - response bodies are capped (1 MiB per document, 8 MiB per probe) and every step has a
 *    timeout (DNS, connect, response headers, body idle, plus the probe's overall deadline).
 *
 * Failures are thrown as `GuardedFetchError` AND kept in `records`, because the MCP SDK's
 * metadata helpers swallow fetch errors ("not implemented"): discovery reads the record.
 */
import dns from 'node:dns';
import net from 'node:net';
import { Agent, Headers, Response, buildConnector, fetch as undiciFetch } from 'undici';
import { decideAddress, isIpLiteral, type AddressPolicy } from './address-policy';
import { addressRefusal } from './address-refusal';

export type FailureCode =
  | 'invalid_url'
  | 'blocked_scheme'
  | 'blocked_credentials'
  | 'blocked_address'
  | 'blocked_redirect'
  | 'too_many_redirects'
  | 'dns_failed'
  | 'dns_timeout'
  | 'connect_refused'
  | 'connect_timeout'
  | 'connection_reset'
  | 'response_timeout'
  | 'too_large'
  | 'timeout'
  | 'aborted'
  | 'network_error';

export interface FetchFailure {
  code: FailureCode;
  message: string;
  /** Refused by the guard itself (no connection was opened). */
  blocked: boolean;
  /** For the server's log only, never an answer: e.g. the refused address of a name (address-refusal.ts). */
  detail?: string;
}

export class GuardedFetchError extends Error {
  constructor(
    readonly failure: FetchFailure,
    options?: { cause?: unknown },
  ) {
    super(failure.message, options);
    this.name = 'GuardedFetchError';
  }
}

const refuse = (code: FailureCode, message: string) => new GuardedFetchError({ code, message, blocked: true });
const fail = (code: FailureCode, message: string, cause?: unknown) =>
  new GuardedFetchError({ code, message, blocked: false }, cause === undefined ? undefined : { cause });

/** What happened to one fetch call (all its redirect hops). */
export interface FetchRecord {
  url: string;
  method: string;
  /** Every URL requested, in order (the first is `url`). */
  hops: string[];
  status?: number;
  contentType?: string;
  wwwAuthenticate?: string;
  failure?: FetchFailure;
}

/** Resolves a host name to its addresses. Injectable so tests never touch real DNS. */
export type HostResolver = (hostname: string) => Promise<string[]>;

export const systemResolver: HostResolver = async (hostname) => {
  const results = await dns.promises.lookup(hostname, { all: true, verbatim: true });
  return results.map((r) => r.address);
};

export interface GuardSettings {
  /** MCP_ALLOW_PRIVATE_NETWORK: loopback and private targets, and plain http to them. */
  allowPrivateNetwork: boolean;
  /** MCP_PRIVATE_ALLOWLIST: exact origins allowed even while the flag is off. */
  privateAllowlist: string[];
}

export interface GuardedFetchOptions extends GuardSettings {
  resolve?: HostResolver;
  /** Epoch ms by which every request of this instance must be over. */
  deadline?: number;
  dnsTimeoutMs?: number;
  connectTimeoutMs?: number;
  responseTimeoutMs?: number;
  bodyIdleTimeoutMs?: number;
  maxDocumentBytes?: number;
  maxTotalBytes?: number;
  maxRedirects?: number;
  now?: () => number;
}

export const GUARD_DEFAULTS = {
  dnsTimeoutMs: 2_000,
  connectTimeoutMs: 3_000,
  responseTimeoutMs: 5_000,
  bodyIdleTimeoutMs: 5_000,
  maxDocumentBytes: 1024 * 1024,
  maxTotalBytes: 8 * 1024 * 1024,
  maxRedirects: 5,
} as const;

/** Dropped when a redirect changes origin (behaviour notes). */
export const CROSS_ORIGIN_STRIPPED_HEADERS = [
  'authorization',
  'cookie',
  'proxy-authorization',
  'mcp-session-id',
  'last-event-id',
  'x-api-key',
  'x-auth-token',
] as const;

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<globalThis.Response>;

export interface GuardedFetch {
  fetch: FetchLike;
  records: FetchRecord[];
  /** Bytes read from response bodies so far. */
  bytesRead(): number;
  /** Closes every connection of this instance. */
  close(): Promise<void>;
}

const unbracket = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);
const isLocalhostName = (host: string) => /^localhost\.?$/i.test(host) || /\.localhost\.?$/i.test(host);

/**
 * The pure part of redirect handling: where the next hop goes and with which method, body and
 * headers. Throws the guard's refusal for a downgrade or a malformed Location.
 */
export function nextHop(
  from: URL,
  status: number,
  location: string,
  request: { method: string; headers: Headers },
): { url: URL; method: string; dropBody: boolean; headers: Headers } {
  let url: URL;
  try {
    url = new URL(location, from);
  } catch {
    throw refuse('blocked_redirect', `Redirect from ${from.href} to an unparsable location`);
  }
  if (from.protocol === 'https:' && url.protocol !== 'https:') {
    throw refuse('blocked_redirect', `Redirect from ${from.href} to ${url.protocol}//${url.host} would downgrade https`);
  }
  const headers = new Headers(request.headers);
  if (url.origin !== from.origin) for (const name of CROSS_ORIGIN_STRIPPED_HEADERS) headers.delete(name);
  // Fetch semantics: 303 turns anything but HEAD into GET; 301/302 turn POST into GET.
  const toGet = (status === 303 && request.method !== 'HEAD') || ((status === 301 || status === 302) && request.method === 'POST');
  if (toGet) {
    headers.delete('content-type');
    headers.delete('content-length');
  }
  return { url, method: toGet ? 'GET' : request.method, dropBody: toGet, headers };
}

function describeNetworkError(error: unknown, url: URL, deadlinePassed: boolean): GuardedFetchError {
  if (error instanceof GuardedFetchError) return error;
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    if (current instanceof GuardedFetchError) return current;
    const e = current as { name?: string; code?: string; message?: string; cause?: unknown };
    const where = url.host;
    if (e.name === 'AbortError' || e.name === 'TimeoutError') {
      return deadlinePassed
        ? fail('timeout', `No answer from ${where} before the probe deadline`, error)
        : fail('aborted', `Request to ${where} was aborted`, error);
    }
    switch (e.code) {
      case 'ECONNREFUSED':
        return fail('connect_refused', `Connection to ${where} was refused`, error);
      case 'ECONNRESET':
      case 'EPIPE':
      case 'UND_ERR_SOCKET':
        return fail('connection_reset', `Connection to ${where} was reset`, error);
      case 'UND_ERR_CONNECT_TIMEOUT':
      case 'ETIMEDOUT':
        return fail('connect_timeout', `Connecting to ${where} timed out`, error);
      case 'UND_ERR_HEADERS_TIMEOUT':
      case 'UND_ERR_BODY_TIMEOUT':
        return fail('response_timeout', `${where} did not answer in time`, error);
      case 'EHOSTUNREACH':
      case 'ENETUNREACH':
        return fail('network_error', `${where} is not reachable from here`, error);
    }
    current = e.cause;
  }
  return fail('network_error', `Request to ${url.host} failed: ${(error as Error)?.message ?? String(error)}`, error);
}

export function createGuardedFetch(options: GuardedFetchOptions): GuardedFetch {
  const settings = { ...GUARD_DEFAULTS, ...options };
  const now = options.now ?? Date.now;
  const resolveHost = options.resolve ?? systemResolver;
  const allowlist = new Set(options.privateAllowlist);
  const records: FetchRecord[] = [];
  /** Addresses judged for each host name; connections go only to these. */
  const pinned = new Map<string, Promise<string[]>>();
  let totalBytes = 0;

  const policyFor = (origin: string): AddressPolicy => ({
    allowPrivate: options.allowPrivateNetwork || allowlist.has(origin),
  });

  const remaining = () => (options.deadline === undefined ? Number.POSITIVE_INFINITY : options.deadline - now());

  async function resolveWithTimeout(hostname: string): Promise<string[]> {
    const timeoutMs = Math.max(1, Math.min(settings.dnsTimeoutMs, remaining()));
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        resolveHost(hostname),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(fail('dns_timeout', `Resolving ${hostname} timed out`)), timeoutMs);
        }),
      ]);
    } catch (error) {
      if (error instanceof GuardedFetchError) throw error;
      throw fail('dns_failed', `Could not resolve ${hostname}`, error);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Addresses of a host, every one of them judged for this origin. */
  async function addressesFor(hostname: string, origin: string): Promise<string[]> {
    const host = unbracket(hostname);
    let addresses: string[];
    if (isIpLiteral(host)) addresses = [host];
    // RFC 6761: localhost names are loopback by definition; never ask DNS about them.
    else if (isLocalhostName(host)) addresses = ['127.0.0.1', '::1'];
    else {
      let pending = pinned.get(host);
      if (!pending) {
        pending = resolveWithTimeout(host);
        pinned.set(host, pending);
        pending.catch(() => pinned.delete(host));
      }
      addresses = await pending;
    }
    if (addresses.length === 0) throw fail('dns_failed', `${host} has no addresses`);
    const policy = policyFor(origin);
    for (const address of addresses) {
      const verdict = decideAddress(address, policy);
      if (!verdict.allowed) {
        throw new GuardedFetchError(addressRefusal(host, address, verdict.reason));
      }
    }
    return addresses;
  }

  /** The checks that need no connection: scheme, user info, addresses, plain http. */
  async function admit(url: URL): Promise<void> {
    if (url.protocol !== 'https:' && url.protocol !== 'http:')
      throw refuse('blocked_scheme', `Blocked: ${url.protocol} URLs are not fetched`);
    if (url.username !== '' || url.password !== '') throw refuse('blocked_credentials', 'Blocked: URLs with credentials are not fetched');
    const allowlisted = allowlist.has(url.origin);
    if (url.protocol === 'http:' && !allowlisted && !options.allowPrivateNetwork) {
      throw refuse('blocked_scheme', `Blocked: ${url.origin} uses plain http; only https is allowed`);
    }
    const addresses = await addressesFor(url.hostname, url.origin);
    if (url.protocol === 'http:' && !allowlisted) {
      // Under the flag, plain http is for private and loopback targets only.
      for (const address of addresses) {
        const verdict = decideAddress(address, { allowPrivate: true });
        if (verdict.decision.class === 'public') {
          throw refuse('blocked_scheme', `Blocked: ${url.origin} uses plain http to a public address; only https is allowed`);
        }
      }
    }
  }

  const baseConnect = buildConnector({ timeout: settings.connectTimeoutMs });
  const guardedConnect: buildConnector.connector = (opts, callback) => {
    const port = opts.port || (opts.protocol === 'https:' ? '443' : '80');
    const hostForUrl = net.isIPv6(opts.hostname) ? `[${opts.hostname}]` : opts.hostname;
    let origin: string;
    try {
      origin = new URL(`${opts.protocol}//${hostForUrl}:${port}`).origin;
    } catch {
      callback(refuse('invalid_url', `Blocked: cannot connect to ${opts.hostname}`), null);
      return;
    }
    addressesFor(opts.hostname, origin).then(
      (addresses) => {
        const address = addresses[0]!;
        // Connect to the judged address; TLS still verifies the name (servername comes from `host`).
        baseConnect({ ...opts, hostname: address }, (error, socket) => {
          if (error || !socket) {
            callback(error ?? fail('network_error', 'no socket'), null);
            return;
          }
          const remote = socket.remoteAddress;
          const verdict = remote ? decideAddress(remote, policyFor(origin)) : undefined;
          if (!verdict?.allowed) {
            socket.destroy();
            callback(new GuardedFetchError(addressRefusal(opts.hostname, remote, verdict?.reason ?? 'no remote address', true)), null);
            return;
          }
          callback(null, socket);
        });
      },
      (error: unknown) => callback(error instanceof Error ? error : fail('network_error', String(error)), null),
    );
  };

  const agent = new Agent({
    connect: guardedConnect,
    headersTimeout: settings.responseTimeoutMs,
    bodyTimeout: settings.bodyIdleTimeoutMs,
    connections: 4,
  });

  function limitBody(response: Awaited<ReturnType<typeof undiciFetch>>, record: FetchRecord, url: URL): globalThis.Response {
    const init = { status: response.status, statusText: response.statusText, headers: response.headers };
    if (!response.body || NULL_BODY_STATUSES.has(response.status)) {
      return new Response(null, init) as unknown as globalThis.Response;
    }
    let documentBytes = 0;
    const counter = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        documentBytes += chunk.byteLength;
        totalBytes += chunk.byteLength;
        if (documentBytes > settings.maxDocumentBytes || totalBytes > settings.maxTotalBytes) {
          const error = fail(
            'too_large',
            documentBytes > settings.maxDocumentBytes
              ? `Response from ${url.host} is larger than ${settings.maxDocumentBytes} bytes`
              : `Responses of this probe exceed ${settings.maxTotalBytes} bytes`,
          );
          record.failure = error.failure;
          controller.error(error);
          return;
        }
        controller.enqueue(chunk);
      },
    });
    return new Response(response.body.pipeThrough(counter), init) as unknown as globalThis.Response;
  }

  async function guardedFetch(input: string | URL, init: RequestInit = {}): Promise<globalThis.Response> {
    const first = typeof input === 'string' || input instanceof URL ? String(input) : (input as { url: string }).url;
    let method = (init.method ?? 'GET').toUpperCase();
    const record: FetchRecord = { url: first, method, hops: [] };
    records.push(record);
    try {
      let url: URL;
      try {
        url = new URL(first);
      } catch {
        throw refuse('invalid_url', `Blocked: ${first} is not a URL`);
      }
      let headers = new Headers(init.headers as ConstructorParameters<typeof Headers>[0]);
      let body = init.body ?? undefined;
      const mode = init.redirect ?? 'follow';
      for (let redirects = 0; ; redirects++) {
        record.hops.push(url.href);
        if (remaining() <= 0) throw fail('timeout', `No time left to fetch ${url.host}`);
        await admit(url);
        const signals = [AbortSignal.timeout(Math.max(1, Math.min(remaining(), 2_147_483_647)))];
        if (init.signal) signals.push(init.signal);
        let response: Awaited<ReturnType<typeof undiciFetch>>;
        try {
          response = await undiciFetch(url, {
            method,
            headers,
            body: body as never,
            redirect: 'manual',
            signal: AbortSignal.any(signals),
            dispatcher: agent,
          });
        } catch (error) {
          throw describeNetworkError(error, url, remaining() <= 0);
        }
        const location = response.headers.get('location');
        if (!REDIRECT_STATUSES.has(response.status) || location === null || mode === 'manual') {
          record.status = response.status;
          record.contentType = response.headers.get('content-type') ?? undefined;
          record.wwwAuthenticate = response.headers.get('www-authenticate') ?? undefined;
          return limitBody(response, record, url);
        }
        await response.body?.cancel().catch(() => undefined);
        if (mode === 'error') throw fail('blocked_redirect', `Redirect from ${url.href} not allowed for this request`);
        if (redirects >= settings.maxRedirects) {
          throw refuse('too_many_redirects', `Blocked: more than ${settings.maxRedirects} redirects from ${first}`);
        }
        const hop = nextHop(url, response.status, location, { method, headers });
        url = hop.url;
        method = hop.method;
        headers = hop.headers;
        if (hop.dropBody) body = undefined;
      }
    } catch (error) {
      const guarded =
        error instanceof GuardedFetchError
          ? error
          : fail('network_error', `Request to ${first} failed: ${(error as Error)?.message ?? String(error)}`, error);
      record.failure = guarded.failure;
      throw guarded;
    }
  }

  return {
    fetch: guardedFetch as FetchLike,
    records,
    bytesRead: () => totalBytes,
    close: async () => {
      await agent.destroy().catch(() => undefined);
    },
  };
}
