/**
 * Connect-link tokens (this service's own design, not a Slack mechanism): an HMAC-signed claim
 * that binds the connection, the workspace and the Slack user, expires after
 * SLACK_LINK_TOKEN_TTL, and carries a nonce that the account-link route records in Postgres so
 * the token works once. Whoever redeems it proves they saw the ephemeral message Slack showed
 * only to that Slack user, so the link cannot be claimed for someone else's Slack identity.
 *
 * Form: base64url(JSON claims) "." base64url(HMAC-SHA256(k, claims part)), where k is derived
 * from the service secret so these MACs can never be confused with another use of that key.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { openingKeys, purposeMac, type SecretKeys } from '../app/secrets';

export interface LinkTokenClaims {
  connectionId: string;
  teamId: string;
  slackUserId: string;
  /** Random, single use: the key of `slack_used_link_tokens`. */
  nonce: string;
  /** ms since epoch. */
  expiresAt: number;
}

/** `invalid`: not a token at all; `unknown`: shaped as one, but not signed by this service. */
export type LinkTokenVerdict =
  | { ok: true; claims: LinkTokenClaims }
  | { ok: false; reason: 'invalid' | 'unknown' }
  | { ok: false; reason: 'expired'; claims: LinkTokenClaims };

/** What a link token looks like: base64url claims, a dot, and a base64url HMAC-SHA256 (the routes' schema pattern too). */
export const LINK_TOKEN_SHAPE = /^[A-Za-z0-9_-]{10,2000}\.[A-Za-z0-9_-]{43}$/;

const tokenMac = (secretKey: Buffer, claimsPart: string): Buffer => purposeMac(secretKey, 'den/slack-link-token/v1', claimsPart);

export function createLinkToken(
  secretKeys: SecretKeys | Buffer,
  input: { connectionId: string; teamId: string; slackUserId: string; now: number; ttlMs: number; nonce?: string },
): { token: string; claims: LinkTokenClaims } {
  const claims: LinkTokenClaims = {
    connectionId: input.connectionId,
    teamId: input.teamId,
    slackUserId: input.slackUserId,
    nonce: input.nonce ?? randomBytes(16).toString('base64url'),
    expiresAt: input.now + input.ttlMs,
  };
  const claimsPart = Buffer.from(
    JSON.stringify({ v: 1, c: claims.connectionId, t: claims.teamId, u: claims.slackUserId, n: claims.nonce, e: claims.expiresAt }),
    'utf8',
  ).toString('base64url');
  return { token: `${claimsPart}.${tokenMac(openingKeys(secretKeys)[0]!, claimsPart).toString('base64url')}`, claims };
}

/** Malformed → invalid; forged or signed with another key → unknown; authentic but late → expired. */
export function verifyLinkToken(secretKeys: SecretKeys | Buffer, token: string, now: number): LinkTokenVerdict {
  if (typeof token !== 'string' || !LINK_TOKEN_SHAPE.test(token)) return { ok: false, reason: 'invalid' };
  const [claimsPart, macPart] = token.split('.') as [string, string];
  const given = Buffer.from(macPart, 'base64url');
  // Signed with the current key, or with the previous one during a rotation.
  const genuine = openingKeys(secretKeys).some((key) => {
    const expected = tokenMac(key, claimsPart);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!genuine) return { ok: false, reason: 'unknown' };
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(Buffer.from(claimsPart, 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    return { ok: false, reason: 'invalid' };
  }
  const { v, c, t, u, n, e } = raw ?? {};
  if (v !== 1 || typeof c !== 'string' || typeof t !== 'string' || typeof u !== 'string' || typeof n !== 'string') {
    return { ok: false, reason: 'invalid' };
  }
  if (typeof e !== 'number' || !Number.isSafeInteger(e)) return { ok: false, reason: 'invalid' };
  const claims: LinkTokenClaims = { connectionId: c, teamId: t, slackUserId: u, nonce: n, expiresAt: e };
  if (now >= e) return { ok: false, reason: 'expired', claims };
  return { ok: true, claims };
}
