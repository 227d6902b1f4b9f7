/**
 * Reads the admin's free-form query. Pure.
 *
 *   http(s)://…                       → a URL (must parse; no user info, no fragment)
 *   contains a dot, no whitespace     → a domain, read as https://<query>
 *   letter/digit + up to 63 of [A-Za-z0-9 &_'-] → a product name, slug = lowercase alphanumerics
 *   anything else                     → invalid
 */
import { slugOf } from './presets';

export type QueryClass =
  | { kind: 'url'; url: string; host: string }
  | { kind: 'domain'; url: string; host: string }
  | { kind: 'name'; name: string; slug: string }
  | { kind: 'invalid' };

export const INVALID_QUERY_REASON = 'Type a server URL or a product name.';

const NAME = /^[A-Za-z0-9][A-Za-z0-9 &_'-]{0,63}$/;
const OTHER_SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;
// DNS-ish labels after WHATWG parsing (which lowercases and punycodes): no empty labels.
const HOST_NAME = /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*\.?$/;
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;

function plausibleHost(hostname: string): boolean {
  if (hostname.startsWith('[') && hostname.endsWith(']')) return true; // IPv6 literal, already validated by URL
  return IPV4.test(hostname) || HOST_NAME.test(hostname);
}

/** Parses an http(s) URL and applies the rules above (no user info, no fragment, a plausible host); undefined when it is not acceptable. */
function acceptableUrl(text: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  // User info would be sent as credentials; a fragment is never sent, so it is a sign of a pasted page URL.
  if (url.username !== '' || url.password !== '' || url.hash !== '' || text.includes('#')) return undefined;
  if (!url.hostname || !plausibleHost(url.hostname)) return undefined;
  return url;
}

export function classifyQuery(query: string): QueryClass {
  const text = query.trim();
  if (text === '') return { kind: 'invalid' };

  if (/^https?:\/\//i.test(text)) {
    const url = acceptableUrl(text);
    return url ? { kind: 'url', url: url.href, host: url.hostname } : { kind: 'invalid' };
  }

  if (text.includes('.') && !/\s/.test(text)) {
    // "ftp://x.y" or "javascript:a.b" are not domains.
    if (OTHER_SCHEME.test(text)) return { kind: 'invalid' };
    if (text.includes('@')) return { kind: 'invalid' };
    const url = acceptableUrl(`https://${text}`);
    return url ? { kind: 'domain', url: url.href, host: url.hostname } : { kind: 'invalid' };
  }

  if (NAME.test(text)) return { kind: 'name', name: text, slug: slugOf(text) };
  return { kind: 'invalid' };
}
