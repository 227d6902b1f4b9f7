/** What the GitHub routes share: the deps type. */
import type { ApiDeps } from '../../app/feature';
import type { GithubSettings } from '../settings';

/** What the GitHub routes use, handed over by the composition root (src/main/compose.ts). */
export type GithubRouteDeps = Pick<ApiDeps<GithubSettings>, 'settings' | 'db' | 'ingress' | 'metrics' | 'now'> & {
  /** A delivery's tenant (src/github/tenant.ts); built by the feature's descriptor. */
  tenantOf: (installationId: number | null) => Promise<string>;
};
