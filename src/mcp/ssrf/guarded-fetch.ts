/**
 * The SSRF-guarded fetch for MCP discovery (docs/mcp.md, "The SSRF guard"). Every outbound
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

type FailureCode =
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

/** An address the guard refused: the host asked for, the address it resolved or connected to, why, and whether after connecting. */
interface RefusedAddress {
  host: string;
  address: string | undefined;
  reason: string;
  afterConnect?: boolean;
}

/**
 * What the guard says when an address is refused. The answer goes back to whoever asked (an
 * admin's MCP resolve), so it names only the host they gave and says its address is not allowed;
 * which address a name resolved to, and the range that refused it, are the `detail`, for the
 * server's log only (an internal name's private address is not the caller's to learn).
 */
function addressRefusal({ host, address, reason, afterConnect = false }: RefusedAddress): FetchFailure {
  const where = afterConnect ? 'Blocked after connect' : 'Blocked';
  return {
    code: 'blocked_address',
    message: `${where}: the address of ${host} is not allowed`,
    blocked: true,
    detail: address !== undefined && address !== host ? `${where}: ${host} resolves to ${reason}` : `${where}: ${reason}`,
  };
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

const systemResolver: HostResolver = async (hostname) => {
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

const GUARD_DEFAULTS = {
  dnsTimeoutMs: 2_000,
  connectTimeoutMs: 3_000,
  responseTimeoutMs: 5_000,
  bodyIdleTimeoutMs: 5_000,
  maxDocumentBytes: 1024 * 1024,
  maxTotalBytes: 8 * 1024 * 1024,
  maxRedirects: 5,
} as const;

/** Dropped when a redirect changes origin. */
const CROSS_ORIGIN_STRIPPED_HEADERS = [
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

type FetchLike = (input: string | URL, init?: RequestInit) => Promise<globalThis.Response>;

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

/** A redirect as it came back: the URL that answered, its status, and its Location header. */
export interface Redirect {
  from: URL;
  status: number;
  location: string;
}

/**
 * The pure part of redirect handling: where the next hop goes and with which method, body and
 * headers. Throws the guard's refusal for a downgrade or a malformed Location.
 */
export function nextHop(
  { from, status, location }: Redirect,
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

type GuardLimits = Record<keyof typeof GUARD_DEFAULTS, number>;

/** One instance's state: its settings, the names it pinned, its records and the bytes it read. */
interface GuardState {
  options: GuardedFetchOptions;
  settings: GuardLimits;
  resolveHost: HostResolver;
  allowlist: Set<string>;
  records: FetchRecord[];
  /** Addresses judged for each host name; connections go only to these. */
  pinned: Map<string, Promise<string[]>>;
  totalBytes: number;
  /** Milliseconds left before the deadline (infinite without one). */
  remaining(): number;
}

function createGuardState(options: GuardedFetchOptions): GuardState {
  const now = options.now ?? Date.now;
  return {
    options,
    settings: { ...GUARD_DEFAULTS, ...options },
    resolveHost: options.resolve ?? systemResolver,
    allowlist: new Set(options.privateAllowlist),
    records: [],
    pinned: new Map(),
    totalBytes: 0,
    remaining: () => (options.deadline === undefined ? Number.POSITIVE_INFINITY : options.deadline - now()),
  };
}

/** Private targets are allowed under the flag, or for an allowlisted origin. */
const policyFor = (state: GuardState, origin: string): AddressPolicy => ({
  allowPrivate: state.options.allowPrivateNetwork || state.allowlist.has(origin),
});

/** Resolves within the DNS timeout (and the deadline); every failure becomes a guard error. */
async function resolveWithTimeout(state: GuardState, hostname: string): Promise<string[]> {
  const timeoutMs = Math.max(1, Math.min(state.settings.dnsTimeoutMs, state.remaining()));
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      state.resolveHost(hostname),
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

/** A name's addresses, resolved once per instance (a failed resolution is forgotten). */
function pinnedAddresses(state: GuardState, host: string): Promise<string[]> {
  let pending = state.pinned.get(host);
  if (!pending) {
    pending = resolveWithTimeout(state, host);
    state.pinned.set(host, pending);
    pending.catch(() => state.pinned.delete(host));
  }
  return pending;
}

/** Refuses the host if any one of its addresses is blocked under the policy. */
function judgeAddresses(host: string, addresses: string[], policy: AddressPolicy): void {
  if (addresses.length === 0) throw fail('dns_failed', `${host} has no addresses`);
  for (const address of addresses) {
    const verdict = decideAddress(address, policy);
    if (!verdict.allowed) {
      throw new GuardedFetchError(addressRefusal({ host, address, reason: verdict.reason }));
    }
  }
}

/** Addresses of a host, every one of them judged for this origin. */
async function addressesFor(state: GuardState, hostname: string, origin: string): Promise<string[]> {
  const host = unbracket(hostname);
  let addresses: string[];
  if (isIpLiteral(host)) addresses = [host];
  // RFC 6761: localhost names are loopback by definition; never ask DNS about them.
  else if (isLocalhostName(host)) addresses = ['127.0.0.1', '::1'];
  else addresses = await pinnedAddresses(state, host);
  judgeAddresses(host, addresses, policyFor(state, origin));
  return addresses;
}

/** The checks on the URL alone: scheme, user info, and plain http only where it may be used. */
function checkUrl(url: URL, allowlisted: boolean, allowPrivateNetwork: boolean): void {
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw refuse('blocked_scheme', `Blocked: ${url.protocol} URLs are not fetched`);
  if (url.username !== '' || url.password !== '') throw refuse('blocked_credentials', 'Blocked: URLs with credentials are not fetched');
  if (url.protocol === 'http:' && !allowlisted && !allowPrivateNetwork) {
    throw refuse('blocked_scheme', `Blocked: ${url.origin} uses plain http; only https is allowed`);
  }
}

/** Under the flag, plain http is for private and loopback targets only. */
function refusePublicPlainHttp(url: URL, addresses: string[]): void {
  for (const address of addresses) {
    const verdict = decideAddress(address, { allowPrivate: true });
    if (verdict.decision.class === 'public') {
      throw refuse('blocked_scheme', `Blocked: ${url.origin} uses plain http to a public address; only https is allowed`);
    }
  }
}

/** The checks that need no connection: scheme, user info, addresses, plain http. */
async function admit(state: GuardState, url: URL): Promise<void> {
  const allowlisted = state.allowlist.has(url.origin);
  checkUrl(url, allowlisted, state.options.allowPrivateNetwork);
  const addresses = await addressesFor(state, url.hostname, url.origin);
  if (url.protocol === 'http:' && !allowlisted) refusePublicPlainHttp(url, addresses);
}

/** The origin undici asks to connect to, or undefined when it is not one. */
function connectOrigin(opts: buildConnector.Options): string | undefined {
  const port = opts.port || (opts.protocol === 'https:' ? '443' : '80');
  const hostForUrl = net.isIPv6(opts.hostname) ? `[${opts.hostname}]` : opts.hostname;
  try {
    return new URL(`${opts.protocol}//${hostForUrl}:${port}`).origin;
  } catch {
    return undefined;
  }
}

/** What undici's connector answered: an error, or the socket it connected. */
interface ConnectAttempt {
  error: Error | null;
  socket: net.Socket | null;
}

/** Hands the socket on only if the address it actually connected to is allowed. */
function checkConnectedSocket(
  { error, socket }: ConnectAttempt,
  connection: { hostname: string; policy: AddressPolicy },
  callback: buildConnector.Callback,
): void {
  if (error || !socket) {
    callback(error ?? fail('network_error', 'no socket'), null);
    return;
  }
  const remote = socket.remoteAddress;
  const verdict = remote ? decideAddress(remote, connection.policy) : undefined;
  if (!verdict?.allowed) {
    socket.destroy();
    const refused = { host: connection.hostname, address: remote, reason: verdict?.reason ?? 'no remote address', afterConnect: true };
    callback(new GuardedFetchError(addressRefusal(refused)), null);
    return;
  }
  callback(null, socket);
}

/** undici's connector, pinned to the judged address and checking the connected socket. */
function createGuardedConnector(state: GuardState): buildConnector.connector {
  const baseConnect = buildConnector({ timeout: state.settings.connectTimeoutMs });
  return (opts, callback) => {
    const origin = connectOrigin(opts);
    if (origin === undefined) {
      callback(refuse('invalid_url', `Blocked: cannot connect to ${opts.hostname}`), null);
      return;
    }
    addressesFor(state, opts.hostname, origin).then(
      (addresses) => {
        const address = addresses[0]!;
        // Connect to the judged address; TLS still verifies the name (servername comes from `host`).
        baseConnect({ ...opts, hostname: address }, (error, socket) =>
          checkConnectedSocket({ error, socket }, { hostname: opts.hostname, policy: policyFor(state, origin) }, callback),
        );
      },
      (error: unknown) => callback(error instanceof Error ? error : fail('network_error', String(error)), null),
    );
  };
}

function createAgent(state: GuardState): Agent {
  return new Agent({
    connect: createGuardedConnector(state),
    headersTimeout: state.settings.responseTimeoutMs,
    bodyTimeout: state.settings.bodyIdleTimeoutMs,
    connections: 4,
  });
}

/** Counts a body's bytes against the document cap and the instance's total, failing the stream past either. */
function byteCounter(state: GuardState, record: FetchRecord, url: URL): TransformStream<Uint8Array, Uint8Array> {
  const { settings } = state;
  let documentBytes = 0;
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      documentBytes += chunk.byteLength;
      state.totalBytes += chunk.byteLength;
      if (documentBytes > settings.maxDocumentBytes || state.totalBytes > settings.maxTotalBytes) {
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
}

type UndiciResponse = Awaited<ReturnType<typeof undiciFetch>>;

/** Where a response came from: the fetch call's record, and the hop's URL. */
interface HopSource {
  record: FetchRecord;
  url: URL;
}

function limitBody(state: GuardState, response: UndiciResponse, { record, url }: HopSource): globalThis.Response {
  const init = { status: response.status, statusText: response.statusText, headers: response.headers };
  if (!response.body || NULL_BODY_STATUSES.has(response.status)) {
    return new Response(null, init) as unknown as globalThis.Response;
  }
  return new Response(response.body.pipeThrough(byteCounter(state, record, url)), init) as unknown as globalThis.Response;
}

/** One guarded fetch instance: its state, and the agent its connections go through. */
interface GuardInstance {
  state: GuardState;
  agent: Agent;
}

/** One hop: admitted, then sent without following redirects, within the deadline. */
async function sendHop(
  { state, agent }: GuardInstance,
  url: URL,
  request: { method: string; headers: Headers; body: unknown; signal: AbortSignal | null | undefined },
): Promise<UndiciResponse> {
  const { remaining } = state;
  if (remaining() <= 0) throw fail('timeout', `No time left to fetch ${url.host}`);
  await admit(state, url);
  const signals = [AbortSignal.timeout(Math.max(1, Math.min(remaining(), 2_147_483_647)))];
  if (request.signal) signals.push(request.signal);
  try {
    return await undiciFetch(url, {
      method: request.method,
      headers: request.headers,
      body: request.body as never,
      redirect: 'manual',
      signal: AbortSignal.any(signals),
      dispatcher: agent,
    });
  } catch (error) {
    throw describeNetworkError(error, url, remaining() <= 0);
  }
}

function parseFirstUrl(first: string): URL {
  try {
    return new URL(first);
  } catch {
    throw refuse('invalid_url', `Blocked: ${first} is not a URL`);
  }
}

/** Sends the request and follows its redirects by hand, each hop admitted again. */
async function followRedirects(guard: GuardInstance, record: FetchRecord, init: RequestInit): Promise<globalThis.Response> {
  const { state } = guard;
  const first = record.url;
  let url = parseFirstUrl(first);
  let method = record.method;
  let headers = new Headers(init.headers as ConstructorParameters<typeof Headers>[0]);
  let body = init.body ?? undefined;
  const mode = init.redirect ?? 'follow';
  for (let redirects = 0; ; redirects++) {
    record.hops.push(url.href);
    const response = await sendHop(guard, url, { method, headers, body, signal: init.signal });
    const location = response.headers.get('location');
    if (!REDIRECT_STATUSES.has(response.status) || location === null || mode === 'manual') {
      record.status = response.status;
      record.contentType = response.headers.get('content-type') ?? undefined;
      record.wwwAuthenticate = response.headers.get('www-authenticate') ?? undefined;
      return limitBody(state, response, { record, url });
    }
    await response.body?.cancel().catch(() => undefined);
    if (mode === 'error') throw fail('blocked_redirect', `Redirect from ${url.href} not allowed for this request`);
    if (redirects >= state.settings.maxRedirects) {
      throw refuse('too_many_redirects', `Blocked: more than ${state.settings.maxRedirects} redirects from ${first}`);
    }
    const hop = nextHop({ from: url, status: response.status, location }, { method, headers });
    url = hop.url;
    method = hop.method;
    headers = hop.headers;
    if (hop.dropBody) body = undefined;
  }
}

/** A fetch call: recorded, and any failure kept in its record as well as thrown. */
async function guardedFetch(guard: GuardInstance, input: string | URL, init: RequestInit = {}): Promise<globalThis.Response> {
  const { state } = guard;
  const first = typeof input === 'string' || input instanceof URL ? String(input) : (input as { url: string }).url;
  const record: FetchRecord = { url: first, method: (init.method ?? 'GET').toUpperCase(), hops: [] };
  state.records.push(record);
  try {
    return await followRedirects(guard, record, init);
  } catch (error) {
    const guarded =
      error instanceof GuardedFetchError
        ? error
        : fail('network_error', `Request to ${first} failed: ${(error as Error)?.message ?? String(error)}`, error);
    record.failure = guarded.failure;
    throw guarded;
  }
}

export function createGuardedFetch(options: GuardedFetchOptions): GuardedFetch {
  const state = createGuardState(options);
  const agent = createAgent(state);
  return {
    fetch: ((input: string | URL, init?: RequestInit) => guardedFetch({ state, agent }, input, init)) as FetchLike,
    records: state.records,
    bytesRead: () => state.totalBytes,
    close: async () => {
      await agent.destroy().catch(() => undefined);
    },
  };
}
