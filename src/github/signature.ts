/**
 * GitHub webhook signatures.
 *
 * `X-Hub-Signature-256: sha256=<hex>` is the HMAC-SHA256 of the exact request bytes under the
 * webhook secret. GitHub signs no timestamp, so unlike Slack there is no clock to inject and
 * no freshness window: the delivery id is the only replay defence (see relevance.ts).
 *
 * Pure functions over bytes and strings; nothing here knows about HTTP.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-hub-signature-256';

/** GitHub always sends lowercase hex; anything else is not a signature GitHub made. */
const SIGNATURE_SHAPE = /^sha256=([0-9a-f]{64})$/;

type SignatureFailure = 'missing' | 'malformed' | 'mismatch';

export type VerifyResult = { ok: true; secret: 'current' | 'previous' } | { ok: false; reason: SignatureFailure };

function hmac(secret: string, payload: Buffer | string): Buffer {
  return createHmac('sha256', secret).update(payload).digest();
}

/** The header value GitHub would send for this payload (tests and tools). */
export function signGithubPayload(secret: string, payload: Buffer | string): string {
  return `sha256=${hmac(secret, payload).toString('hex')}`;
}

/** Parses the header into the 32 digest bytes, or says why it is not a signature. */
function parseHeader(header: string | string[] | undefined): Buffer | SignatureFailure {
  // Node gives an array (or a ", "-joined string) for a repeated header: more than one
  // signature is malformed, never "try each".
  if (Array.isArray(header)) return header.length === 0 ? 'missing' : 'malformed';
  if (header === undefined || header.trim() === '') return 'missing';
  const match = SIGNATURE_SHAPE.exec(header.trim());
  if (!match) return 'malformed';
  return Buffer.from(match[1]!, 'hex');
}

/** Why the header alone already fails verification (missing or malformed), or undefined when only the body can tell. */
export function signatureHeaderFailure(header: string | string[] | undefined): SignatureFailure | undefined {
  const digest = parseHeader(header);
  return Buffer.isBuffer(digest) ? undefined : digest;
}

/** Constant-time check of one secret. Both sides are 32 bytes by construction. */
function matches(secret: string, rawBody: Buffer, digest: Buffer): boolean {
  return timingSafeEqual(hmac(secret, rawBody), digest);
}

/** Verifies the header against one secret. */
export function verifyGithubSignature(secret: string, rawBody: Buffer, header: string | string[] | undefined): VerifyResult {
  return verifyWithFallback({ current: secret }, rawBody, header);
}

/**
 * Verifies against the current secret and, during a rotation, the previous one. Both are
 * always computed so the time taken doesn't reveal which secret matched.
 */
export function verifyWithFallback(
  secrets: { current: string; previous?: string | undefined },
  rawBody: Buffer,
  header: string | string[] | undefined,
): VerifyResult {
  const digest = parseHeader(header);
  if (!Buffer.isBuffer(digest)) return { ok: false, reason: digest };
  const current = matches(secrets.current, rawBody, digest);
  const previous = secrets.previous !== undefined && matches(secrets.previous, rawBody, digest);
  if (current) return { ok: true, secret: 'current' };
  if (previous) return { ok: true, secret: 'previous' };
  return { ok: false, reason: 'mismatch' };
}
