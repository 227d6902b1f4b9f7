/**
 * The front door's per-process resolver of a delivery's targets, read through short caches so
 * that a delivery rarely waits on Postgres:
 *
 * - whose delivery it is, for admission and fair dispatch: the organization that owns the
 *   delivery's installation (`github_installations`); an installation nobody owns is its own
 *   tenant (`github-installation:<id>`). A lookup Postgres cannot answer falls back to the
 *   installation.
 * - whether any active target takes a push (src/github/target-match.ts): a push no target takes
 *   is answered `no matching target` and starts nothing. Only an answer the cache can vouch for
 *   says so: every change to the targets or to ownership is announced on the Postgres channel
 *   `github_targets` (a trigger, migration 0013_github_limits), and each replica drops its cache
 *   when told. While this process is not listening on that channel (starting, or its connection
 *   lost), or when Postgres cannot answer, the answer is `unknown` and the push is accepted
 *   durably, as every push was before.
 *
 * Entries also expire after TARGET_CACHE_MS, a bound on anything the channel could miss.
 */
import { sql } from 'kysely';
import { boundedCache } from '../app/bounded-caches';
import type { Channels } from '../app/store/channels';
import type { Db } from '../app/store/db';
import { installationOwner } from './installations';
import { refMatches } from './target-match';

const TARGET_CACHE_MS = 30_000;
const MAX_CACHED = 10_000;
/** The channel the targets' trigger notifies. */
const TARGETS_CHANNEL = 'github_targets';

/** A repository webhook (no App installation) is tenant `github-installation:0`. */
function installationTenant(installationId: number): string {
  return `github-installation:${installationId}`;
}

export interface PushRef {
  installationId: number;
  repository: { id: number; fullName: string };
  ref: string;
  defaultBranch: string | null;
}

export interface DeliveryResolver {
  tenantOf(installationId: number | null): Promise<string>;
  /** `none` only when this process can vouch for it; `unknown` accepts the push durably. */
  pushTargets(push: PushRef): Promise<'matched' | 'none' | 'unknown'>;
}

type Candidate = { ref: string | null; defaultBranch: string | null };

/** Active targets of the repository on the installation whose organization owns it (by id, or by name for a target created without one). */
async function candidates(db: Db, push: PushRef): Promise<Candidate[]> {
  const rows = await db
    .selectFrom('github_connector_targets as t')
    .select(['t.ref', 't.default_branch'])
    .where('t.installation_id', '=', String(push.installationId))
    .where('t.status', '=', 'active')
    .where((eb) =>
      eb.or([
        eb('t.repository_id', '=', String(push.repository.id)),
        eb.and([
          eb('t.repository_id', 'is', null),
          eb(sql<string>`lower(t.repository_full_name)`, '=', push.repository.fullName.toLowerCase()),
        ]),
      ]),
    )
    .where(
      sql<boolean>`EXISTS (SELECT 1 FROM github_installations i
        WHERE i.installation_id = t.installation_id AND i.organization_id = t.organization_id)`,
    )
    .execute();
  return rows.map((r) => ({ ref: r.ref, defaultBranch: r.default_branch }));
}

export function createDeliveryResolver(db: Db, channels: Channels, now: () => number = Date.now): DeliveryResolver {
  // Bounded, least recently used first out, and each entry gone TARGET_CACHE_MS after it was set.
  const tenants = boundedCache<string>({ max: MAX_CACHED, ttlMs: TARGET_CACHE_MS, now });
  const targets = boundedCache<Candidate[]>({ max: MAX_CACHED, ttlMs: TARGET_CACHE_MS, now });
  // Bumped at each invalidation: an answer read across one is not cached.
  let generation = 0;
  const invalidate = () => {
    generation += 1;
    targets.clear();
    tenants.clear();
  };
  const subscription = channels.subscribe(TARGETS_CHANNEL, { notified: invalidate, reset: invalidate });
  return {
    async tenantOf(installationId) {
      if (installationId === null) return installationTenant(0);
      const key = String(installationId);
      const hit = tenants.get(key);
      if (hit !== undefined) return hit;
      try {
        const tenant = (await installationOwner(db, installationId)) ?? installationTenant(installationId);
        tenants.set(key, tenant);
        return tenant;
      } catch {
        return installationTenant(installationId);
      }
    },
    async pushTargets(push) {
      if (!subscription.listening) return 'unknown';
      const key = `${push.installationId}:${push.repository.id}:${push.repository.fullName.toLowerCase()}`;
      let found = targets.get(key);
      if (found === undefined) {
        const before = generation;
        try {
          found = await candidates(db, push);
        } catch {
          return 'unknown';
        }
        if (!subscription.listening || generation !== before) return 'unknown';
        targets.set(key, found);
      }
      const match = { ref: push.ref, defaultBranch: push.defaultBranch };
      return found.some((target) => refMatches(target, match)) ? 'matched' : 'none';
    },
  };
}
