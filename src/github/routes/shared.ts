/** What the GitHub routes share: the deps type. */
import type { ApiDeps } from '../../app/feature';
import type { GithubApi } from '../api';
import type { InstallerClient } from '../oauth';
import type { GithubSettings } from '../settings';
import type { DeliveryResolver } from '../tenant';

/** What the GitHub routes use, handed over by the composition root (src/main/api.ts). */
export type GithubRouteDeps = Pick<ApiDeps<GithubSettings>, 'settings' | 'db' | 'ingress' | 'metrics' | 'now' | 'secretKey'> & {
  /** GitHub's API as the App (undefined without App credentials), for the target's repository check; built by the feature's descriptor. */
  api: GithubApi | undefined;
  /** The install flow's OAuth client (undefined without the App's slug and client); built by the feature's descriptor. */
  installer: InstallerClient | undefined;
  /** A delivery's tenant and whether a push has a target (src/github/tenant.ts); built by the feature's descriptor. */
  resolver: DeliveryResolver;
};
