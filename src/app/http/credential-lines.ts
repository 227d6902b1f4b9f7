/**
 * Node keeps only the first of two `Authorization` lines in `req.headers`, so the credential the
 * authenticator sees can hide a second one. Every line is still in `req.rawHeaders`: this puts
 * each credential header back as the list of all its lines, so more than one stays malformed.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** The headers that carry a credential; each may appear at most once. */
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key'] as const;

/** `headers` with every credential header that appears on more than one line as an array of its lines. Pure. */
export function withCredentialLines(headers: IncomingHttpHeaders, rawHeaders: readonly string[]): IncomingHttpHeaders {
  const lines = new Map<string, string[]>();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (!(CREDENTIAL_HEADERS as readonly string[]).includes(name)) continue;
    lines.set(name, [...(lines.get(name) ?? []), rawHeaders[i + 1]!]);
  }
  const repeated = [...lines].filter(([, values]) => values.length > 1);
  if (repeated.length === 0) return headers;
  return { ...headers, ...Object.fromEntries(repeated) };
}
