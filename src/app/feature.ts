/**
 * The one thing a feature hands the composition root (src/main/features.ts lists them): its
 * settings, routes, search attributes, task queues, CLI commands, background sweeps and Temporal
 * Schedules. What the worker runs of it (its workflows and activities) the root wires itself
 * (src/main/worker-code.ts), so no feature imports workflows/ or activities/.
 * The API, the worker, the CLI, the dev server and the start-up checks all read these
 * descriptors, so adding a feature touches no hand-kept list outside its own files and that one
 * line in the root.
 */
import type { Command } from 'commander';
import type { CliContext } from './cli';
import type { AuthCacheSettings } from './bounded-caches';
import type { FeatureSchedule } from './temporal/schedules';
import type { SearchAttributeKey } from './temporal/search-attributes';
import type { Authenticator } from './http/auth';
import type { Route } from './http/route';
import type { IngressGateway } from './ingress';
import type { Logger } from './log';
import type { Metrics } from './metrics';
import type { Notices } from './notices';
import type { SecretKeys } from './secrets';
import type { SettingsSlice } from './settings';
import type { Channels } from './store/channels';
import type { Db } from './store/db';

/** The platform's values a feature may use besides its own settings. */
export interface PlatformValues {
  /** The URL the service is reachable at, for links it hands out. */
  publicBaseUrl: string;
  /** The task queue this process's workflows and activities run on. */
  taskQueue: string;
  /** The bounds of the caches every verifying feature keeps (src/app/bounded-caches.ts). */
  authCaches: AuthCacheSettings;
}

/** What the API process hands a feature's routes: its own settings and the shared clients. */
export interface ApiDeps<S> {
  settings: S;
  platform: PlatformValues;
  db: Db;
  /** Postgres notifications across replicas (src/app/store/channels.ts), e.g. to drop a cache when another process changed its rows. */
  channels: Channels;
  log: Logger;
  metrics: Metrics;
  /** Every call to Temporal's workflows (src/app/ingress.ts): features never hold the client itself. */
  ingress: IngressGateway;
  /** This API's notices between features (src/app/notices.ts). */
  notices: Notices;
  secretKey: SecretKeys;
  /** The clock every route uses (tests inject one). */
  now: () => number;
}

/** What a worker process hands a feature's activities and sweeps. */
export interface WorkerDeps<S> {
  settings: S;
  platform: PlatformValues;
  db: Db;
  log: Logger;
  /** Every call to Temporal's workflows (the worker admits nothing itself: src/main/gateway.ts). */
  ingress: IngressGateway;
  secretKey: SecretKeys;
}

/** A periodic job the worker role runs, e.g. closing rows whose workflow ended outside its logic. */
interface Sweep<S> {
  name: string;
  intervalMs: number;
  run(deps: WorkerDeps<S>, now: Date): Promise<void>;
}

/** An activity as Temporal registers it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ActivityFunction = (...args: any[]) => Promise<unknown>;

/**
 * A feature's descriptor. Methods (not function properties) keep a `Feature<SlackSettings>`
 * assignable to the root's `Feature<unknown>[]`: each part only ever receives its own settings.
 */
export interface Feature<S = unknown> {
  name: string;
  /** The feature's slice of the environment; the root validates every slice at once. */
  settings?: SettingsSlice<S>;
  searchAttributes?: readonly SearchAttributeKey[];
  /** Extra task queues the worker polls, derived from the main one. */
  taskQueues?(mainQueue: string): string[];
  routes?(deps: ApiDeps<S>): Route[];
  /** The identity feature's: turns credentials into a principal for every authenticated route. */
  authenticator?(deps: ApiDeps<S>): Authenticator;
  sweeps?: readonly Sweep<S>[];
  /** Temporal Schedules the worker role creates or updates at start (none when the feature is not configured). */
  schedules?(deps: WorkerDeps<S>): FeatureSchedule[];
  /** Its `den` commands, with the context `den` runs them in (src/app/cli.ts). */
  cli?(program: Command, context: CliContext<S>): void;
}

/** Declares a descriptor, keeping its name's literal type and inferring its settings from the slice. */
export function defineFeature<S, const N extends string>(feature: Feature<S> & { name: N }): Feature<S> & { name: N } {
  return feature;
}
