/**
 * What a provider's install flow shares (a GitHub App installation, a Slack OAuth install): the
 * signed, single-use, short-lived `state` that binds the flow to an organization, the admin who
 * started it and optionally a subject (a connection id), and the small HTML page its callback
 * answers with.
 *
 * A state is base64url(JSON claims) "." base64url(HMAC-SHA256(k, claims part)), k derived from
 * the service secret for this use alone, so these MACs can never be confused with another use of
 * that key. Issuing one writes its row in `flow_states` (keyed by its random nonce); consuming it
 * checks the signature, the purpose and the expiry, then claims the row with one conditional
 * UPDATE, so of two callbacks carrying one state exactly one goes on.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import type { Reply } from './http/route';
import { openingKeys, purposeMac, type SecretKeys } from './secrets';
import type { NullableTimestamp, Timestamp } from './store/columns';
import type { Db } from './store/db';

declare module './store/schema' {
  interface Database {
    /** One row per issued install-flow state (migration 0011_installation_bindings). */
    flow_states: {
      nonce: string;
      purpose: string;
      organization_id: string;
      member_id: string;
      subject: string | null;
      expires_at: Timestamp;
      used_at: NullableTimestamp;
      created_at: Timestamp;
    };
  }
}

/** What a state is for (`github_install`, `slack_install`): a state of one purpose is refused by another's callback. */
const PURPOSE = /^[a-z][a-z0-9_]{0,39}$/;
/** What a state looks like: base64url claims, a dot, and a base64url HMAC-SHA256 (the callbacks' schema pattern too). */
export const FLOW_STATE_SHAPE = /^[A-Za-z0-9_-]{10,1500}\.[A-Za-z0-9_-]{43}$/;
/** How long a state's row is kept after it expired, before a later issue prunes it. */
const KEEP_AFTER_EXPIRY_MS = 60 * 60_000;
const PRUNE_BATCH = 100;

export interface FlowStateClaims {
  purpose: string;
  organizationId: string;
  memberId: string;
  subject: string | null;
  nonce: string;
  /** ms since epoch. */
  expiresAt: number;
}

/** Why a state was refused; each has a sentence in FLOW_STATE_REFUSALS. */
export type FlowStateRefusal = 'malformed' | 'bad_signature' | 'wrong_purpose' | 'expired' | 'reused' | 'unknown';

export type FlowStateVerdict = { ok: true; claims: FlowStateClaims } | { ok: false; reason: FlowStateRefusal };

/** What the callback's page says for each refusal: the flow must be started again. */
export const FLOW_STATE_REFUSALS: Record<FlowStateRefusal, string> = {
  malformed: 'The link carries no valid state.',
  bad_signature: 'The link’s state was not issued by this service, or was altered.',
  wrong_purpose: 'The link’s state was issued for another flow.',
  expired: 'The link has expired.',
  reused: 'The link was already used.',
  unknown: 'The link’s state is not known to this service.',
};

const stateMac = (secretKey: Buffer, claimsPart: string): Buffer => purposeMac(secretKey, 'den/install-flow-state/v1', claimsPart);

/** The state string for these claims, signed with the current key. */
export function signFlowState(keys: SecretKeys | Buffer, claims: FlowStateClaims): string {
  const { purpose: p, organizationId: o, memberId: m, subject: s, nonce: n, expiresAt: e } = claims;
  const claimsPart = Buffer.from(JSON.stringify({ v: 1, p, o, m, s, n, e }), 'utf8').toString('base64url');
  return `${claimsPart}.${stateMac(openingKeys(keys)[0]!, claimsPart).toString('base64url')}`;
}

function parseClaims(claimsPart: string): FlowStateClaims | undefined {
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(Buffer.from(claimsPart, 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const { v, p, o, m, s, n, e } = raw ?? {};
  const strings = [p, o, m, n].every((x) => typeof x === 'string' && x.length > 0);
  if (v !== 1 || !strings || !(s === null || typeof s === 'string') || typeof e !== 'number' || !Number.isSafeInteger(e)) return undefined;
  return {
    purpose: p as string,
    organizationId: o as string,
    memberId: m as string,
    subject: s as string | null,
    nonce: n as string,
    expiresAt: e,
  };
}

/**
 * Checks a state without Postgres: its shape, its signature (the current key, or the previous one
 * during a rotation), its purpose and its expiry. Whether it was used is consumeFlowState's part.
 */
export function readFlowState(keys: SecretKeys | Buffer, state: unknown, expected: { purpose: string; now: number }): FlowStateVerdict {
  if (typeof state !== 'string' || !FLOW_STATE_SHAPE.test(state)) return { ok: false, reason: 'malformed' };
  const [claimsPart, macPart] = state.split('.') as [string, string];
  const given = Buffer.from(macPart, 'base64url');
  const genuine = openingKeys(keys).some((key) => {
    const expectedMac = stateMac(key, claimsPart);
    return given.length === expectedMac.length && timingSafeEqual(given, expectedMac);
  });
  if (!genuine) return { ok: false, reason: 'bad_signature' };
  const claims = parseClaims(claimsPart);
  if (!claims) return { ok: false, reason: 'malformed' };
  if (claims.purpose !== expected.purpose) return { ok: false, reason: 'wrong_purpose' };
  if (expected.now >= claims.expiresAt) return { ok: false, reason: 'expired' };
  return { ok: true, claims };
}

export interface FlowStateDeps {
  db: Db;
  secretKey: SecretKeys | Buffer;
  now: () => number;
}

/** Issues a state and records its row; rows that expired a while ago are pruned on the way, a bounded batch at a time. */
export async function issueFlowState(
  deps: FlowStateDeps,
  input: { purpose: string; organizationId: string; memberId: string; subject?: string; ttlMs: number },
): Promise<{ state: string; expiresAt: number }> {
  if (!PURPOSE.test(input.purpose)) throw new Error(`invalid flow purpose: ${input.purpose}`);
  const now = deps.now();
  const claims: FlowStateClaims = {
    purpose: input.purpose,
    organizationId: input.organizationId,
    memberId: input.memberId,
    subject: input.subject ?? null,
    nonce: randomBytes(18).toString('base64url'),
    expiresAt: now + input.ttlMs,
  };
  await deps.db
    .deleteFrom('flow_states')
    .where('nonce', 'in', (eb) =>
      eb
        .selectFrom('flow_states')
        .select('nonce')
        .where('expires_at', '<', new Date(now - KEEP_AFTER_EXPIRY_MS))
        .limit(PRUNE_BATCH),
    )
    .execute();
  await deps.db
    .insertInto('flow_states')
    .values({
      nonce: claims.nonce,
      purpose: claims.purpose,
      organization_id: claims.organizationId,
      member_id: claims.memberId,
      subject: claims.subject,
      expires_at: new Date(claims.expiresAt),
    })
    .execute();
  return { state: signFlowState(deps.secretKey, claims), expiresAt: claims.expiresAt };
}

/**
 * Consumes a state once: readFlowState's checks, then the row is claimed atomically. A row
 * already claimed is `reused`; a signed state without a row (pruned, or issued by another
 * deployment sharing the key) is `unknown`.
 */
export async function consumeFlowState(deps: FlowStateDeps, state: unknown, purpose: string): Promise<FlowStateVerdict> {
  const read = readFlowState(deps.secretKey, state, { purpose, now: deps.now() });
  if (!read.ok) return read;
  const { claims } = read;
  const claimed = await deps.db
    .updateTable('flow_states')
    .set({ used_at: sql`now()` })
    .where('nonce', '=', claims.nonce)
    .where('purpose', '=', claims.purpose)
    .where('organization_id', '=', claims.organizationId)
    .where('member_id', '=', claims.memberId)
    .where('used_at', 'is', null)
    .returning('nonce')
    .executeTakeFirst();
  if (claimed) return read;
  const row = await deps.db.selectFrom('flow_states').select('used_at').where('nonce', '=', claims.nonce).executeTakeFirst();
  return { ok: false, reason: row?.used_at ? 'reused' : 'unknown' };
}

// ---------------------------------------------------------------------------------------
// The callback's answer: a tiny HTML document, no scripts, no styles, nothing loaded.

/**
 * Nothing may load, run, submit or frame: the page is text. No referrer leaves it either, since
 * its own address carries the callback's code and state.
 */
export const FLOW_PAGE_POLICY = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** The callback's answer: a title, a sentence, and optional labelled facts, every value escaped. */
export function flowPage(input: { status: number; title: string; message: string; facts?: [string, string][] }): Reply {
  const facts = (input.facts ?? []).map(([label, value]) => `<dt>${escapeHtml(label)}</dt><dd>${escapeHtml(value)}</dd>`).join('');
  const body = [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">',
    `<title>${escapeHtml(input.title)}</title></head>`,
    `<body><h1>${escapeHtml(input.title)}</h1><p>${escapeHtml(input.message)}</p>`,
    facts === '' ? '' : `<dl>${facts}</dl>`,
    '</body></html>',
    '',
  ].join('\n');
  return {
    status: input.status,
    body,
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': FLOW_PAGE_POLICY,
      'cache-control': 'no-store',
      'referrer-policy': 'no-referrer',
      'x-frame-options': 'DENY',
    },
  };
}
