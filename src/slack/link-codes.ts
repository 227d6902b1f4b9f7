/**
 * Link codes: what a member types to link their Slack account without a dashboard
 * (`npx den slack link ABCDE-FGHJK`). A code is 10 characters of Crockford's base32 (50 random
 * bits), short enough to type, and stands on the server for the same claims as a link token
 * (src/slack/link-token.ts): the connection, the workspace, the Slack user, a nonce and an expiry.
 * The slash command's reply and the connect prompt issue a token and a code with one nonce, so
 * whichever the member uses, the other is spent with it (src/slack/links.ts records the nonce).
 *
 * Only an HMAC of the code under the service secret is stored, so the table alone cannot be
 * turned back into codes to redeem. A code is redeemed by a member of the connection's
 * organization with their own API key or session, and lives SLACK_LINK_TOKEN_TTL (10 min).
 */
import { randomBytes } from 'node:crypto';
import { openingKeys, purposeMac, type SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import { createLinkToken, type LinkTokenClaims } from './link-token';

/** Crockford's base32: no I, L, O or U, so nothing reads as another character. */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CODE_LENGTH = 10;
const LINK_CODE = /^[0-9A-HJKMNP-TV-Z]{10}$/;
/** How long a code's row is kept after it expired (so a late try is told `link_expired`), before an issue prunes it. */
const LINK_CODE_KEPT_MS = 60 * 60_000;
const LINK_CODE_PRUNE_BATCH = 100;

/**
 * A code as a member may type it (the routes' schema pattern): ten characters of Crockford's
 * base32 in either case, its look-alikes (I, L, O) included, with spaces or dashes anywhere.
 */
export const TYPED_LINK_CODE = /^[ -]*(?:[0-9A-TV-Za-tv-z][ -]*){10}$/;

/** A fresh code: each character 5 of 50 random bits. */
export function newLinkCode(): string {
  const bytes = randomBytes(CODE_LENGTH);
  return [...bytes].map((byte) => ALPHABET[byte & 31]).join('');
}

/** As a member reads it: two groups of five. */
export const formatLinkCode = (code: string): string => `${code.slice(0, 5)}-${code.slice(5)}`;

/**
 * A code as typed, in its one spelling: upper case, without dashes or spaces, and Crockford's
 * look-alikes read as the digits they stand for (O as 0, I and L as 1). Undefined when it cannot be one.
 */
export function normalizeLinkCode(typed: string): string | undefined {
  if (typeof typed !== 'string' || typed.length > 40) return undefined;
  const code = typed.toUpperCase().replace(/[\s-]/g, '').replace(/O/g, '0').replace(/[IL]/g, '1');
  return LINK_CODE.test(code) ? code : undefined;
}

const codeHash = (secretKey: Buffer, code: string): string => purposeMac(secretKey, 'den/slack-link-code/v1', code).toString('base64url');

/** A link token and a code for the same claims (one nonce): the reply offers both, and either works once. */
export async function issueConnectGrant(
  deps: { db: Db; secretKey: SecretKeys | Buffer },
  input: { connectionId: string; teamId: string; slackUserId: string; now: number; ttlMs: number },
): Promise<{ token: string; code: string; claims: LinkTokenClaims }> {
  const { token, claims } = createLinkToken(deps.secretKey, input);
  const code = newLinkCode();
  await deps.db
    .deleteFrom('slack_link_codes')
    .where('code_hash', 'in', (eb) =>
      eb
        .selectFrom('slack_link_codes')
        .select('code_hash')
        .where('expires_at', '<', new Date(input.now - LINK_CODE_KEPT_MS))
        .limit(LINK_CODE_PRUNE_BATCH),
    )
    .execute();
  await deps.db
    .insertInto('slack_link_codes')
    .values({
      code_hash: codeHash(openingKeys(deps.secretKey)[0]!, code),
      connection_id: claims.connectionId,
      team_id: claims.teamId,
      slack_user_id: claims.slackUserId,
      nonce: claims.nonce,
      expires_at: new Date(claims.expiresAt),
      created_at: new Date(input.now),
    })
    .execute();
  return { token, code: formatLinkCode(code), claims };
}

/**
 * The claims a typed code stands for: `invalid` when it is malformed, `unknown` when it is no
 * code of this service (a code issued under the previous secret key is still found during a
 * rotation), `expired` past its expiry. Whether it was used is the nonce's part (src/slack/links.ts).
 */
export async function readLinkCode(
  deps: { db: Db; secretKey: SecretKeys | Buffer },
  typed: string,
  now: number,
): Promise<
  | { ok: true; claims: LinkTokenClaims }
  | { ok: false; reason: 'invalid' | 'unknown' }
  | { ok: false; reason: 'expired'; claims: LinkTokenClaims }
> {
  const code = normalizeLinkCode(typed);
  if (code === undefined) return { ok: false, reason: 'invalid' };
  const hashes = openingKeys(deps.secretKey).map((key) => codeHash(key, code));
  const row = await deps.db.selectFrom('slack_link_codes').selectAll().where('code_hash', 'in', hashes).executeTakeFirst();
  if (!row) return { ok: false, reason: 'unknown' };
  const claims: LinkTokenClaims = {
    connectionId: row.connection_id,
    teamId: row.team_id,
    slackUserId: row.slack_user_id,
    nonce: row.nonce,
    expiresAt: row.expires_at.getTime(),
  };
  return now >= claims.expiresAt ? { ok: false, reason: 'expired', claims } : { ok: true, claims };
}
