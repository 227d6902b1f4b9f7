/**
 * The checks every signed Slack route runs: before the body, signature headers that could verify
 * (else 401); after it, the connection's signing secrets (else 401 `unknown_installation`), the
 * signature over the raw bytes (else 401 `invalid_signature`), then the connection as it is now.
 * Routes whose requests carry no id of their own to dedupe on add the replay cache with
 * `verifiedOnce`.
 *
 * A valid request is never refused for what other requests did, from its address or to its
 * connection id. What a forgery costs is bounded instead, and is the same whether its id exists:
 * - an unknown id and a bad signature are refused at the same point, after the body is read (the
 *   unauthenticated budget bounds what that holds), with the same answer;
 * - every such refusal costs exactly one lookup of the id's sealed secrets, through a batched
 *   lookup (src/app/batched-lookup.ts), so a flood of forgeries costs a bounded number of queries
 *   in flight, and a known and an unknown id take the same work and the same time to refuse;
 * - the opened secrets are cached (bounded, least recently used first out): a valid request is
 *   verified before any database read, and a secret is decrypted only when its sealed form changed.
 * A refusal that rereads a cached connection's secrets also picks up a rotated secret at once.
 */
import { createBatchedLookup, type BatchedLookup } from '../app/batched-lookup';
import { boundedCache, type AuthCacheSettings, type BoundedCache } from '../app/bounded-caches';
import { errors } from '../app/errors';
import type { AppContext } from '../app/http/context';
import type { Metrics } from '../app/metrics';
import type { SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import {
  findSealedSigningSecrets,
  findSlackConnection,
  openSigningSecrets,
  type SealedSigningSecrets,
  type SlackConnection,
} from './connections';
import { firstSighting } from './replays';
import { signatureStamp, slackHeadersFailure, verifySlackSignature, type SlackSigningSecrets } from './signature';

/** Lookups of connection ids' sealed secrets: two queries in flight at most, up to 500 ids each. */
const LOOKUPS = { concurrency: 2, maxBatch: 500, maxWaiting: 20_000 };

export interface VerifyDeps {
  db: Db;
  secretKey: SecretKeys;
  metrics: Metrics;
  now: () => number;
  platform: { authCaches: AuthCacheSettings };
}

/** A connection's secrets as last read: sealed (to tell a change) and opened. */
interface CachedSecrets {
  sealed: SealedSigningSecrets;
  secrets: SlackSigningSecrets;
}

interface VerifierState {
  cached: BoundedCache<CachedSecrets>;
  lookup: BatchedLookup<SealedSigningSecrets>;
}

/** What the verifier's steps share: its deps, and the state it keeps between requests. */
interface VerifierCore {
  deps: VerifyDeps;
  state: VerifierState;
}

/** Why a request to a connection is refused. */
interface Refused {
  connectionId: string;
  reason: string;
}

/** A signed request: the connection its path names, and its body's raw bytes (what the signature covers). */
export interface SignedBody {
  connectionId: string;
  rawBody: Buffer;
}

/** One process's verification of signed Slack requests, with the cache and lookup that keep forgeries cheap. */
export interface SlackVerifier {
  /** The check that needs no body, run before it is read: 401 for signature headers that cannot verify whatever the body. */
  checkHeaders(ctx: AppContext, connectionId: string): void;
  /** The signature over the raw bytes, then the connection as it is now; 401 `{ok:false}` for either cause. */
  verifiedConnection(ctx: AppContext, connectionId: string, rawBody: Buffer): Promise<SlackConnection>;
  /**
   * `verifiedConnection`, then the replay cache: a request already seen within its signature
   * window is a 401 `{ok:false}` like a bad signature, so a captured request is worth one answer only.
   */
  verifiedOnce(ctx: AppContext, connectionId: string, rawBody: Buffer): Promise<SlackConnection>;
  /**
   * Drops a connection's cached secrets (its removal, new credentials). Not needed for a correct
   * answer, which every request reads fresh; it frees the entry and spares a stale first check.
   */
  forget(connectionId: string): void;
}

export function createSlackVerifier(deps: VerifyDeps): SlackVerifier {
  const state: VerifierState = {
    cached: boundedCache<CachedSecrets>({ max: deps.platform.authCaches.maxKeys }),
    lookup: createBatchedLookup((ids) => findSealedSigningSecrets(deps.db, ids), LOOKUPS),
  };
  const verifiedConnection = (ctx: AppContext, id: string, rawBody: Buffer) =>
    verified({ deps, state }, ctx, { connectionId: id, rawBody });
  return {
    checkHeaders: (ctx, id) => {
      const failure = slackHeadersFailure(ctx.headers, deps.now);
      if (failure) refuseRequest(deps, ctx, { connectionId: id, reason: failure });
    },
    verifiedConnection,
    forget: (id) => state.cached.delete(id),
    verifiedOnce: async (ctx, id, rawBody) => {
      const connection = await verifiedConnection(ctx, id, rawBody);
      if (!(await firstSighting(deps.db, { connectionId: id, ...signatureStamp(ctx.headers) }))) {
        deps.metrics.signatureFailures.inc({ route: ctx.state.routeTemplate ?? 'slack', reason: 'replayed' });
        ctx.state.log.info({ connectionId: id }, 'slack request replayed within its signature window');
        throw errors.webhook('invalid_signature', 401);
      }
      return connection;
    },
  };
}

/**
 * Reads the id's sealed secrets (through the batched lookup) into the cache, opening them only if
 * they changed; a 401 for an id that does not exist.
 */
async function readSecrets({ deps, state }: VerifierCore, ctx: AppContext, id: string): Promise<CachedSecrets> {
  const sealed = await state.lookup(id);
  if (!sealed) {
    state.cached.delete(id);
    refuseRequest(deps, ctx, { connectionId: id, reason: 'unknown_installation' });
  }
  const before = state.cached.get(id);
  const same = before && JSON.stringify(before.sealed) === JSON.stringify(sealed);
  const entry = { sealed, secrets: same ? before.secrets : openSigningSecrets(deps.secretKey, sealed) };
  state.cached.set(id, entry);
  return entry;
}

/**
 * 401 `{ok:false}`, the same answer, count and log line for an unknown installation as for a bad
 * signature, so neither tells a caller whether the id exists.
 */
function refuseRequest(deps: VerifyDeps, ctx: AppContext, { connectionId, reason }: Refused): never {
  deps.metrics.authFailures.inc({ surface: 'slack', outcome: 'rejected' });
  deps.metrics.signatureFailures.inc({ route: ctx.state.routeTemplate ?? 'slack', reason });
  ctx.state.log.info({ connectionId, reason }, 'slack request refused');
  throw errors.webhook(reason === 'unknown_installation' ? 'unknown_installation' : 'invalid_signature', 401);
}

/**
 * The signature against the secrets: the cached ones, read again if they fail (so every refusal
 * costs one read, whether the id was cached or not, and a rotated secret counts at once). Then
 * the connection read fresh, whose secrets must verify it too: the cache only spares a valid
 * request a read, never lets a request through.
 */
async function verified(core: VerifierCore, ctx: AppContext, { connectionId: id, rawBody }: SignedBody): Promise<SlackConnection> {
  const { deps, state } = core;
  const check = (secrets: SlackSigningSecrets) => verifySlackSignature({ rawBody, headers: ctx.headers, secrets, now: deps.now });
  const cached = state.cached.get(id);
  let verdict = cached && check(cached.secrets);
  if (!verdict?.ok) verdict = check((await readSecrets(core, ctx, id)).secrets);
  if (!verdict.ok) refuseRequest(deps, ctx, { connectionId: id, reason: verdict.reason });
  const connection = await findSlackConnection(deps.db, deps.secretKey, id);
  // Removed, or (a draft) without a signing secret since the cache took it: as unknown as an id never seen.
  if (!connection || connection.secrets === null) {
    state.cached.delete(id);
    refuseRequest(deps, ctx, { connectionId: id, reason: 'unknown_installation' });
  }
  const current = check(connection.secrets);
  if (!current.ok) refuseRequest(deps, ctx, { connectionId: id, reason: current.reason });
  if (current.secret === 'previous') ctx.state.log.info({ connectionId: id }, 'slack request verified with the previous signing secret');
  return connection;
}
