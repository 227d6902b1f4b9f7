/**
 * Whose delivery this is, for admission and fair dispatch: the organization that owns the
 * delivery's installation (`github_installations`); an installation nobody owns is its own tenant
 * (`github-installation:<id>`), so it gets one fair share of its own rather than joining someone
 * else's.
 *
 * Read through a short per-process cache: an installation bound or unbound moves its deliveries
 * within TENANT_CACHE_MS. A lookup Postgres cannot answer falls back to the installation, so a
 * delivery never waits on Postgres for this.
 */
import type { Db } from '../app/store/db';
import { installationOwner } from './installations';

const TENANT_CACHE_MS = 30_000;
const MAX_CACHED = 10_000;

/** A repository webhook (no App installation) is tenant `github-installation:0`. */
function installationTenant(installationId: number): string {
  return `github-installation:${installationId}`;
}

export function createTenantResolver(db: Db, now: () => number = Date.now): (installationId: number | null) => Promise<string> {
  const cache = new Map<number, { tenant: string; at: number }>();
  return async (installationId) => {
    if (installationId === null) return installationTenant(0);
    const hit = cache.get(installationId);
    if (hit && now() - hit.at < TENANT_CACHE_MS) return hit.tenant;
    let tenant = installationTenant(installationId);
    try {
      tenant = (await installationOwner(db, installationId)) ?? tenant;
    } catch {
      return tenant;
    }
    cache.delete(installationId);
    cache.set(installationId, { tenant, at: now() });
    if (cache.size > MAX_CACHED) cache.delete(cache.keys().next().value!);
    return tenant;
  };
}
