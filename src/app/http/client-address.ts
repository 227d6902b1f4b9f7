/**
 * Which address a request comes from. Without trusted proxies it is the socket's peer, and
 * forwarding headers are ignored: anyone can write `X-Forwarded-For`. Behind a load balancer,
 * TRUSTED_PROXIES names the balancer's addresses or CIDRs; a request whose peer is one of them
 * comes from the right-most `X-Forwarded-For` entry that is not itself a trusted proxy
 * (`proxy-addr`, the rule Express's `trust proxy` uses).
 *
 * The address decides only what one source may hold of the process's budget for unauthenticated
 * bodies (src/app/http/unauthenticated-budget.ts); no credential is judged by it.
 */
import type { IncomingMessage } from 'node:http';
import proxyaddr from 'proxy-addr';

export type ClientAddress = (req: IncomingMessage) => string;

/** `proxy-addr`'s names (`loopback`, `linklocal`, `uniquelocal`), addresses and CIDRs; throws on anything else. */
export function clientAddressOf(trustedProxies: readonly string[]): ClientAddress {
  const trust = proxyaddr.compile([...trustedProxies]);
  return (req) => proxyaddr(req, trust);
}

/** Why a TRUSTED_PROXIES entry list is unusable, or undefined when it is fine. */
export function trustedProxiesProblem(trustedProxies: readonly string[]): string | undefined {
  try {
    proxyaddr.compile([...trustedProxies]);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}
