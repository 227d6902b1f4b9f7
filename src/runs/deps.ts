import type { ApiDeps } from '../app/feature';
import type { RunsSettings } from './settings';

/** What the run routes use, handed over by the composition root (src/main/api.ts). */
export type RunDeps = Pick<ApiDeps<RunsSettings>, 'settings' | 'platform' | 'db' | 'ingress' | 'notices' | 'metrics' | 'log' | 'now'>;
