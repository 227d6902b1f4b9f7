/**
 * Slack request signing (https://api.slack.com/authentication/verifying-requests-from-slack),
 * as a pure function: raw bytes, headers, secrets and a clock in; a verdict out. Knows nothing
 * of Koa, so the published test vector and every tamper case are plain unit tests.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Slack's replay window. Ours applies it in both directions: a timestamp too far in the future is refused too. */
export const SLACK_TIMESTAMP_TOLERANCE_SECONDS = 300;

export interface SlackSigningSecrets {
  current: string;
  /** The secret before a rotation, accepted until `expiresAt` (ms since epoch). */
  previous?: { secret: string; expiresAt: number };
}

type SlackSignatureFailure =
  'missing_headers' | 'malformed_timestamp' | 'malformed_signature' | 'stale_timestamp' | 'future_timestamp' | 'mismatch';

export type SignatureVerdict = { ok: true; secret: 'current' | 'previous' } | { ok: false; reason: SlackSignatureFailure };

export type HeaderBag = Record<string, string | string[] | undefined>;

const SLACK_SIGNATURE_SHAPE = /^v0=[0-9a-f]{64}$/;
const TIMESTAMP_SHAPE = /^[0-9]{1,15}$/;

/** `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{raw body}`. */
export function signSlackRequest(secret: string, timestamp: number | string, rawBody: Buffer | string): string {
  const hmac = createHmac('sha256', secret);
  hmac.update(`v0:${timestamp}:`, 'utf8');
  hmac.update(typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody);
  return `v0=${hmac.digest('hex')}`;
}

/** A header by (lowercase) name. A repeated header is treated as malformed, never "pick one". */
function headerValue(headers: HeaderBag, name: string): string | undefined | null {
  const value = headers[name] ?? headers[Object.keys(headers).find((k) => k.toLowerCase() === name) ?? ''];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) return value.length === 1 ? value[0]! : null;
  return value;
}

/** A signed request as checked: its timestamp header, its raw body, and the signature it carries (the hex digest's bytes). */
interface SignedPayload {
  timestamp: string;
  rawBody: Buffer | string;
  expected: Buffer;
}

function signatureMatches(secret: string, { timestamp, rawBody, expected }: SignedPayload): boolean {
  const computed = Buffer.from(signSlackRequest(secret, timestamp, rawBody).slice(3), 'hex');
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

type SignedHeaders = { timestamp: string; expected: Buffer } | { failure: SlackSignatureFailure };

/** The checks that need no body: both headers present once, well formed, and the timestamp within the window. */
function readSignedHeaders(headers: HeaderBag, now: () => number, toleranceSeconds?: number): SignedHeaders {
  const signature = headerValue(headers, 'x-slack-signature');
  const timestamp = headerValue(headers, 'x-slack-request-timestamp');
  if (signature === undefined || timestamp === undefined || signature === '' || timestamp === '') {
    return { failure: 'missing_headers' };
  }
  // Shape checks before any crypto: cheap, and they keep junk away from the HMAC.
  if (timestamp === null || !TIMESTAMP_SHAPE.test(timestamp.trim())) return { failure: 'malformed_timestamp' };
  if (signature === null || !SLACK_SIGNATURE_SHAPE.test(signature.trim().toLowerCase())) return { failure: 'malformed_signature' };
  const ts = timestamp.trim();
  const tolerance = toleranceSeconds ?? SLACK_TIMESTAMP_TOLERANCE_SECONDS;
  const skew = Number(ts) - now() / 1000;
  // Past: a replayed request. Future: Slack's bolt does not check it; we do, since a future
  // timestamp would otherwise stretch the replay window.
  if (skew < -tolerance) return { failure: 'stale_timestamp' };
  if (skew > tolerance) return { failure: 'future_timestamp' };
  return { timestamp: ts, expected: Buffer.from(signature.trim().toLowerCase().slice(3), 'hex') };
}

/** Why the headers alone already fail verification, or undefined when only the body can tell. */
export function slackHeadersFailure(headers: HeaderBag, now: () => number): SlackSignatureFailure | undefined {
  const read = readSignedHeaders(headers, now);
  return 'failure' in read ? read.failure : undefined;
}

export function verifySlackSignature(input: {
  rawBody: Buffer | string;
  headers: HeaderBag;
  secrets: SlackSigningSecrets;
  now: () => number;
  toleranceSeconds?: number;
}): SignatureVerdict {
  const read = readSignedHeaders(input.headers, input.now, input.toleranceSeconds);
  if ('failure' in read) return { ok: false, reason: read.failure };
  const signed = { timestamp: read.timestamp, rawBody: input.rawBody, expected: read.expected };
  if (signatureMatches(input.secrets.current, signed)) return { ok: true, secret: 'current' };
  const previous = input.secrets.previous;
  if (previous && input.now() < previous.expiresAt && signatureMatches(previous.secret, signed)) {
    return { ok: true, secret: 'previous' };
  }
  return { ok: false, reason: 'mismatch' };
}

/** The timestamp and signature of a request that verified, normalised as they were checked. */
export function signatureStamp(headers: HeaderBag): { timestamp: number; signature: string } {
  const timestamp = headerValue(headers, 'x-slack-request-timestamp');
  const signature = headerValue(headers, 'x-slack-signature');
  if (typeof timestamp !== 'string' || typeof signature !== 'string') throw new Error('signatureStamp needs a verified request');
  return { timestamp: Number(timestamp.trim()), signature: signature.trim().toLowerCase() };
}
