/**
 * The SSRF-guarded fetch over real loopback sockets. A connection-counting server that is NOT
 * on the allowlist proves that refused requests open no connection at all. Nothing here ever
 * targets an address outside loopback: those ranges are covered by address-policy.test.ts.
 */
import { Headers } from 'undici';
import { createGuardedFetch, GuardedFetchError, nextHop, type GuardedFetchOptions } from '../../src/mcp/ssrf/guarded-fetch';
import { installLoopbackTripwire, startCountingServer, startUtilityServer, testResolver } from '../harness/mcp';

type Counting = Awaited<ReturnType<typeof startCountingServer>>;
type Utility = Awaited<ReturnType<typeof startUtilityServer>>;

let tripwire: ReturnType<typeof installLoopbackTripwire>;
let counting: Counting;
let u: Utility;
let v: Utility;

beforeAll(async () => {
  tripwire = installLoopbackTripwire();
  [counting, u, v] = await Promise.all([startCountingServer(), startUtilityServer(), startUtilityServer()]);
});

afterAll(async () => {
  await Promise.all([counting.stop(), u.stop(), v.stop()]);
  tripwire.restore();
  expect(tripwire.violations).toEqual([]);
});

function guard(options: Partial<GuardedFetchOptions> = {}) {
  return createGuardedFetch({
    allowPrivateNetwork: false,
    privateAllowlist: [u.origin, v.origin],
    resolve: testResolver(),
    deadline: Date.now() + 5_000,
    ...options,
  });
}

async function failureOf(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    if (error instanceof GuardedFetchError) return error.failure;
    throw error;
  }
  throw new Error('expected the request to fail');
}

describe('refusals open no connection (flag off, counting server not allowlisted)', () => {
  beforeEach(() => counting.reset());

  const forms = (port: number) => [
    `http://127.0.0.1:${port}/`,
    `https://127.0.0.1:${port}/`,
    `http://localhost:${port}/`,
    `https://localhost:${port}/mcp`,
    `https://sub.localhost:${port}/mcp`,
    `http://[::1]:${port}/`,
    `https://[::1]:${port}/`,
    `http://[::ffff:127.0.0.1]:${port}/`,
    `https://[::ffff:127.0.0.1]:${port}/`,
    `https://[0:0:0:0:0:ffff:7f00:1]:${port}/`,
    `http://2130706433:${port}/`,
    `https://2130706433:${port}/`,
    `http://0x7f000001:${port}/`,
    `https://0x7f000001:${port}/`,
    `http://0177.0.0.1:${port}/`,
    `https://0177.0.0.1:${port}/`,
    `https://127.1:${port}/`,
    `http://0.0.0.0:${port}/`,
    `https://0.0.0.0:${port}/`,
    `https://[::]:${port}/`,
  ];

  it('every notation of loopback is refused before connecting', async () => {
    const g = guard();
    for (const url of forms(counting.port)) {
      const failure = await failureOf(g.fetch(url));
      expect({ url, blocked: failure.blocked, code: failure.code }).toEqual({
        url,
        blocked: true,
        code: url.startsWith('http:') ? 'blocked_scheme' : 'blocked_address',
      });
    }
    await g.close();
    expect(counting.connections()).toBe(0);
    // The record keeps why in its detail (for the log), even though the caller only sees a thrown error.
    expect(g.records.every((r) => r.failure?.blocked)).toBe(true);
    const decimal = g.records.find((r) => r.url.startsWith('https://2130706433'))?.failure;
    expect(decimal?.message).toBe('Blocked: the address of 127.0.0.1 is not allowed');
    expect(decimal?.detail).toMatch(/127\.0\.0\.0\/8 \(loopback\)/);
  });

  it('a name that resolves to loopback is refused; so is a name with one blocked address among others', async () => {
    const resolver = testResolver({ 'internal.test': ['127.0.0.1'], 'multi.test': ['127.0.0.1', '169.254.169.254'] });
    const g = guard({ resolve: resolver, privateAllowlist: [`https://multi.test:${counting.port}`] });
    const internal = await failureOf(g.fetch(`https://internal.test:${counting.port}/`));
    expect(internal).toMatchObject({ code: 'blocked_address', blocked: true });
    // The message names only the host asked for; the address it resolved to is in the detail.
    expect(internal.message).toBe('Blocked: the address of internal.test is not allowed');
    expect(internal.detail).toContain('internal.test resolves to 127.0.0.1');
    // Allowlisted origin, but one of its addresses is link-local/metadata: the whole name is refused.
    const multi = await failureOf(g.fetch(`https://multi.test:${counting.port}/`));
    expect(multi).toMatchObject({ code: 'blocked_address', blocked: true });
    expect(multi.message).not.toContain('169.254.169.254');
    expect(multi.detail).toContain('169.254.169.254');
    await g.close();
    expect(resolver.asked).toEqual(['internal.test', 'multi.test']);
    expect(counting.connections()).toBe(0);
  });

  it('user info and other schemes are refused', async () => {
    const g = guard({ privateAllowlist: [counting.origin] });
    expect(await failureOf(g.fetch(`http://user:secret@127.0.0.1:${counting.port}/`))).toMatchObject({
      code: 'blocked_credentials',
      blocked: true,
    });
    expect(await failureOf(g.fetch(`ftp://127.0.0.1:${counting.port}/`))).toMatchObject({ code: 'blocked_scheme' });
    expect(await failureOf(g.fetch('file:///etc/passwd'))).toMatchObject({ code: 'blocked_scheme' });
    expect(await failureOf(g.fetch('not a url'))).toMatchObject({ code: 'invalid_url' });
    await g.close();
    expect(counting.connections()).toBe(0);
  });

  it('positive control: the same origin on the allowlist does connect (the counter works)', async () => {
    const g = guard({ privateAllowlist: [counting.origin] });
    const failure = await failureOf(g.fetch(`${counting.origin}/`));
    expect(failure.blocked).toBe(false); // the counting server hangs up: a network failure, not a refusal
    await g.close();
    expect(counting.connections()).toBe(1);
  });

  it('positive control: MCP_ALLOW_PRIVATE_NETWORK opens loopback (and plain http to it)', async () => {
    const g = guard({ allowPrivateNetwork: true, privateAllowlist: [] });
    await failureOf(g.fetch(`http://localhost:${counting.port}/`));
    await failureOf(g.fetch(`http://[::1]:${counting.port}/`));
    expect(await failureOf(g.fetch(`http://0.0.0.0:${counting.port}/`))).toMatchObject({ code: 'blocked_address', blocked: true });
    await g.close();
    expect(counting.connections()).toBe(2);
  });

  it('the allowlist is exact: another port on the same host stays blocked', async () => {
    const g = guard({ privateAllowlist: [`http://127.0.0.1:${counting.port + 1}`, `http://localhost:${counting.port}`] });
    expect(await failureOf(g.fetch(`http://127.0.0.1:${counting.port}/`))).toMatchObject({ blocked: true });
    expect(await failureOf(g.fetch(`https://127.0.0.1:${counting.port}/`))).toMatchObject({ code: 'blocked_address' });
    await g.close();
    expect(counting.connections()).toBe(0);
  });
});

describe('redirects', () => {
  beforeEach(() => counting.reset());

  it('a redirect from an allowlisted server to the counting server is refused, in every form', async () => {
    const g = guard();
    const targets = [
      `http://127.0.0.1:${counting.port}/mcp`,
      `https://127.0.0.1:${counting.port}/mcp`,
      `http://[::1]:${counting.port}/`,
      `http://localhost:${counting.port}/`,
      `https://2130706433:${counting.port}/`,
      `http://user:pw@127.0.0.1:${counting.port}/`,
    ];
    for (const target of targets) {
      for (const status of [301, 302, 303, 307, 308]) {
        const failure = await failureOf(g.fetch(`${u.origin}/redirect?status=${status}&to=${encodeURIComponent(target)}`));
        expect(failure.blocked).toBe(true);
      }
    }
    await g.close();
    expect(counting.connections()).toBe(0);
    expect(g.records[0]!.hops).toEqual([`${u.origin}/redirect?status=301&to=${encodeURIComponent(targets[0]!)}`, targets[0]]);
  });

  it('follows at most 5 redirects', async () => {
    const g = guard();
    const five = await g.fetch(`${u.origin}/chain/5`);
    expect(five.status).toBe(200);
    expect(await five.json()).toEqual({ arrived: true });
    expect(await failureOf(g.fetch(`${u.origin}/chain/6`))).toMatchObject({ code: 'too_many_redirects', blocked: true });
    await g.close();
  });

  it('drops credential headers when the origin changes, keeps method and body on 307', async () => {
    const g = guard();
    const secrets = {
      authorization: 'Bearer secret',
      cookie: 'a=b',
      'proxy-authorization': 'Basic x',
      'mcp-session-id': 'session',
      'last-event-id': '7',
      'x-api-key': 'den_key',
      'x-auth-token': 'token',
    };
    const response = await g.fetch(`${u.origin}/redirect?status=307&to=${encodeURIComponent(`${v.origin}/echo-headers`)}`, {
      method: 'POST',
      headers: { ...secrets, 'x-keep': 'yes', 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    const echoed = (await response.json()) as { method: string; headers: Record<string, string>; body: string };
    expect(echoed.method).toBe('POST');
    expect(echoed.body).toBe('{"a":1}');
    expect(echoed.headers['x-keep']).toBe('yes');
    for (const name of Object.keys(secrets)) expect(echoed.headers[name]).toBeUndefined();
    // The first hop did get them (same request, before the origin changed).
    expect(u.seen.at(-1)!.headers.authorization).toBe('Bearer secret');
    await g.close();
  });

  it('keeps credential headers on a same-origin redirect; 303 turns POST into GET without a body', async () => {
    const g = guard();
    const same = await g.fetch(`${u.origin}/redirect?status=302&to=/echo-headers`, { headers: { authorization: 'Bearer secret' } });
    expect(((await same.json()) as { headers: Record<string, string> }).headers.authorization).toBe('Bearer secret');
    const see = await g.fetch(`${u.origin}/redirect?status=303&to=/echo-headers`, {
      method: 'POST',
      body: 'x',
      headers: { 'content-type': 'text/plain' },
    });
    const echoed = (await see.json()) as { method: string; headers: Record<string, string>; body: string };
    expect([echoed.method, echoed.body, echoed.headers['content-type']]).toEqual(['GET', '', undefined]);
    await g.close();
  });

  it('never downgrades https to http (pure hop decision)', () => {
    const headers = new Headers({ authorization: 'x' });
    const redirect = (from: string, status: number, location: string) => ({ from: new URL(from), status, location });
    expect(() => nextHop(redirect('https://a.example/x', 302, 'http://a.example/y'), { method: 'GET', headers })).toThrow(
      GuardedFetchError,
    );
    expect(() => nextHop(redirect('https://a.example/x', 302, 'http://b.example/y'), { method: 'GET', headers })).toThrow(/downgrade/);
    const up = nextHop(redirect('http://a.example/x', 302, 'https://a.example/y'), { method: 'GET', headers });
    expect(up.url.href).toBe('https://a.example/y');
    expect(up.headers.get('authorization')).toBeNull(); // http→https changes the origin
    const same = nextHop(redirect('https://a.example/x', 307, '/y'), { method: 'POST', headers });
    expect([same.method, same.dropBody, same.headers.get('authorization')]).toEqual(['POST', false, 'x']);
  });
});

describe('caps, timeouts and DNS', () => {
  it('caps a document at 1 MiB', async () => {
    const g = guard();
    const response = await g.fetch(`${u.origin}/big`);
    await expect(response.text()).rejects.toThrow(/larger than 1048576 bytes/);
    expect(g.records.at(-1)!.failure?.code).toBe('too_large');
    const small = await g.fetch(`${u.origin}/json`);
    expect(await small.json()).toEqual({ ok: true });
    await g.close();
  });

  it('caps a whole probe at maxTotalBytes', async () => {
    const g = guard({ maxTotalBytes: 20 });
    await (await g.fetch(`${u.origin}/json`)).text();
    await (await g.fetch(`${u.origin}/json`)).text().catch(() => undefined);
    expect(g.records.at(-1)!.failure?.code).toBe('too_large');
    await g.close();
  });

  it('times out waiting for response headers', async () => {
    const g = guard({ responseTimeoutMs: 300 });
    const started = Date.now();
    expect(await failureOf(g.fetch(`${u.origin}/hang`))).toMatchObject({ code: 'response_timeout', blocked: false });
    expect(Date.now() - started).toBeLessThan(2_000);
    await g.close();
  });

  it('stops at the probe deadline even when the body keeps dripping', async () => {
    const g = guard({ deadline: Date.now() + 800 });
    const started = Date.now();
    const response = await g.fetch(`${u.origin}/drip`);
    await expect(response.text()).rejects.toBeDefined();
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await failureOf(g.fetch(`${u.origin}/json`))).toMatchObject({ code: 'timeout' });
    await g.close();
  });

  it('bounds DNS resolution with a timeout', async () => {
    const g = guard({ resolve: () => new Promise<string[]>(() => undefined), dnsTimeoutMs: 100 });
    expect(await failureOf(g.fetch('https://slow-dns.test/'))).toMatchObject({ code: 'dns_timeout' });
    await g.close();
  });

  it('asks the injected resolver once per name and connects to the address it judged', async () => {
    const resolver = testResolver({ 'pinned.test': ['127.0.0.1'] });
    const g = guard({ resolve: resolver, privateAllowlist: [`http://pinned.test:${u.port}`] });
    for (let i = 0; i < 3; i++) expect((await g.fetch(`http://pinned.test:${u.port}/json`)).status).toBe(200);
    expect(resolver.asked).toEqual(['pinned.test']);
    expect(u.seen.at(-1)!.headers.host).toBe(`pinned.test:${u.port}`);
    expect(await failureOf(g.fetch('https://unknown.test/'))).toMatchObject({ code: 'dns_failed', blocked: false });
    expect(resolver.asked).toEqual(['pinned.test', 'unknown.test']);
    await g.close();
  });

  it('never asks DNS about localhost names', async () => {
    const resolver = testResolver();
    const g = guard({ resolve: resolver, privateAllowlist: [`http://localhost:${u.port}`] });
    expect((await g.fetch(`http://localhost:${u.port}/json`)).status).toBe(200);
    await g.close();
    expect(resolver.asked).toEqual([]);
  });
});
