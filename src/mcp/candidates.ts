/**
 * From a classified query to the bounded list of endpoints to probe, with presets first.
 * Pure: no network, no clock.
 */
import { classifyQuery, type QueryClass } from './classify';
import { findPresetByHost, findPresetByName, withPreregisteredClient, type PreregisteredClients } from './presets';
import type { McpCandidate, McpPreset, PresetMatch } from './types';

const MAX_CANDIDATES = 5;

const IPV4_HOST = /^\d{1,3}(?:\.\d{1,3}){3}$/;
const isIpHost = (hostname: string) => IPV4_HOST.test(hostname) || hostname.startsWith('[');

/** The first host label after dropping `mcp`, `www` and `api`, capitalised. */
export function suggestedNameFor(url: string): string {
  let hostname: string;
  try {
    hostname = new URL(url).hostname;
  } catch {
    return 'MCP server';
  }
  if (hostname.startsWith('[')) return hostname.slice(1, -1);
  if (IPV4_HOST.test(hostname)) return hostname;
  const label = hostname
    .replace(/\.$/, '')
    .split('.')
    .find((part) => part !== '' && !['mcp', 'www', 'api'].includes(part));
  if (!label) return 'MCP server';
  return label.charAt(0).toUpperCase() + label.slice(1);
}

function withMcpPath(url: URL): string {
  return `${url.origin}/mcp`;
}

/** Candidate URLs in probe order, deduplicated, at most five. */
export function candidateUrls(query: Exclude<QueryClass, { kind: 'invalid' }>): string[] {
  const urls: string[] = [];
  if (query.kind === 'name') {
    const s = query.slug;
    urls.push(
      `https://mcp.${s}.com/mcp`,
      `https://mcp.${s}.com/`,
      `https://mcp.${s}.dev/mcp`,
      `https://mcp.${s}.io/mcp`,
      `https://mcp.${s}.ai/mcp`,
    );
  } else {
    const url = new URL(query.url);
    urls.push(url.href);
    if (url.pathname === '/' && url.search === '') urls.push(withMcpPath(url));
    if (query.kind === 'domain' && !url.hostname.startsWith('mcp.') && !isIpHost(url.hostname)) {
      urls.push(`https://mcp.${url.host}/mcp`);
    }
  }
  return [...new Set(urls)].slice(0, MAX_CANDIDATES);
}

export type ResolvePlan =
  { kind: 'invalid' } | { kind: 'probe'; query: QueryClass; preset?: McpPreset; presetMatch?: PresetMatch; candidates: McpCandidate[] };

function findPreset(query: Exclude<QueryClass, { kind: 'invalid' }>): { preset: McpPreset; match: PresetMatch } | undefined {
  if (query.kind !== 'name') return findPresetByHost(query.host);
  const preset = findPresetByName(query.name);
  return preset && { preset, match: { by: 'name' } };
}

/**
 * Classification → preset match → candidates. A preset matches by its normalised id or display
 * name, by the host of its URL, or by one of its product domains (or a subdomain of one); then
 * only the preset's URL is probed, never a candidate of the host the query named.
 */
export function planResolve(rawQuery: string, preregisteredClients: PreregisteredClients = {}): ResolvePlan {
  const query = classifyQuery(rawQuery);
  if (query.kind === 'invalid') return { kind: 'invalid' };

  const found = findPreset(query);
  if (found) {
    const filled = withPreregisteredClient(found.preset, preregisteredClients);
    return {
      kind: 'probe',
      query,
      preset: filled,
      presetMatch: found.match,
      candidates: [{ url: filled.url, source: 'preset', suggestedName: filled.displayName }],
    };
  }

  const source = query.kind;
  return {
    kind: 'probe',
    query,
    candidates: candidateUrls(query).map((url) => ({ url, source, suggestedName: suggestedNameFor(url) })),
  };
}
