/** What the GitHub routes share: the deps type. */
import type { ApiDeps } from '../../app/feature';
import type { GithubSettings } from '../settings';

/** What the GitHub routes use, handed over by the composition root (src/main/compose.ts). */
export type GithubRouteDeps = Pick<ApiDeps<GithubSettings>, 'settings' | 'db' | 'ingress' | 'metrics' | 'now'>;
