/** Which address a request comes from (src/app/http/client-address.ts), and the settings that decide it, without a server. */
import type { IncomingMessage } from 'node:http';
import { clientAddressOf } from '../../src/app/http/client-address';
import { ConfigError } from '../../src/app/settings';
import { loadConfigWith } from '../../src/main/config';

/** A request as `proxy-addr` reads it: the socket's peer and the forwarding header. */
const request = (peer: string, forwardedFor?: string) =>
  ({
    socket: { remoteAddress: peer },
    connection: { remoteAddress: peer },
    headers: forwardedFor ? { 'x-forwarded-for': forwardedFor } : {},
  }) as unknown as IncomingMessage;

describe('clientAddressOf', () => {
  it('without trusted proxies, is the socket peer, whatever X-Forwarded-For says', () => {
    const of = clientAddressOf([]);
    expect(of(request('10.0.0.7', '203.0.113.9'))).toBe('10.0.0.7');
  });

  it('behind a trusted proxy, is the right-most forwarded address that is not a trusted proxy', () => {
    const of = clientAddressOf(['10.0.0.0/8']);
    expect(of(request('10.0.0.7', '203.0.113.9'))).toBe('203.0.113.9');
    // A client can prepend anything; the entries the trusted hops appended are what counts.
    expect(of(request('10.0.0.7', '198.51.100.1, 203.0.113.9, 10.1.2.3'))).toBe('203.0.113.9');
    expect(of(request('10.0.0.7'))).toBe('10.0.0.7');
  });

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy', () => {
    const of = clientAddressOf(['10.0.0.1']);
    expect(of(request('192.0.2.50', '203.0.113.9'))).toBe('192.0.2.50');
  });

  it("accepts proxy-addr's names", () => {
    expect(clientAddressOf(['loopback'])(request('127.0.0.1', '203.0.113.9'))).toBe('203.0.113.9');
  });
});

describe('front-door settings', () => {
  const problems = (env: Record<string, string>) => {
    try {
      loadConfigWith(env);
      return [];
    } catch (error) {
      return (error as ConfigError).problems;
    }
  };

  it('parses TRUSTED_PROXIES as a comma-separated list, and refuses an entry that is not an address, CIDR or name', () => {
    expect(loadConfigWith({ TRUSTED_PROXIES: ' 10.0.0.0/8, ::1 ,loopback' }).http.trustedProxies).toEqual([
      '10.0.0.0/8',
      '::1',
      'loopback',
    ]);
    expect(loadConfigWith({}).http.trustedProxies).toEqual([]);
    expect(problems({ TRUSTED_PROXIES: '10.0.0.0/8,not-an-address' })).toEqual([expect.stringMatching(/^TRUSTED_PROXIES: /)]);
  });

  it('refuses a request timeout shorter than the headers timeout, and an address share larger than the budget', () => {
    expect(problems({ HTTP_HEADERS_TIMEOUT: '30s', HTTP_REQUEST_TIMEOUT: '10s' })).toEqual([
      expect.stringMatching(/^HTTP_REQUEST_TIMEOUT: /),
    ]);
    expect(
      problems({ UNAUTHENTICATED_BODY_BUDGET: String(64 * 1024 * 1024), UNAUTHENTICATED_BODY_PER_ADDRESS: String(65 * 1024 * 1024) }),
    ).toEqual([expect.stringMatching(/^UNAUTHENTICATED_BODY_PER_ADDRESS: /)]);
  });
});
