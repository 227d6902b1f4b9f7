import type { HostResolver } from '../../src/mcp/ssrf/guarded-fetch';

/**
 * The resolver the tests inject into the guard: it never sends a DNS query. Names in `map`
 * answer with the given (loopback) addresses; every other name fails, as an unresolvable name
 * would. `asked` lists every name the guard asked about.
 */
export function testResolver(map: Record<string, string[]> = {}): HostResolver & { asked: string[] } {
  const asked: string[] = [];
  const resolver = async (hostname: string) => {
    asked.push(hostname);
    const answer = map[hostname.toLowerCase()];
    if (answer) return answer;
    throw Object.assign(new Error(`test resolver: no DNS for ${hostname}`), { code: 'ENOTFOUND' });
  };
  return Object.assign(resolver, { asked });
}
