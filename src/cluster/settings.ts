/**
 * `npm run cluster`'s own settings (docs/operations.md, "Production topology"): a Temporal server
 * with Postgres persistence, API replicas on PORT, PORT+1, … and worker processes, on this machine.
 */
import { platformSettings, type PlatformConfig } from '../app/config';
import { ConfigError, defineSettings, int, optionalString, port, type Environment } from '../app/settings';

export const clusterSettings = defineSettings(
  {
    CLUSTER_HISTORY_SHARDS: int(8, 1, 16384),
    // Membership ports sit 300 below the gRPC ports and Temporal stores them as smallint.
    CLUSTER_TEMPORAL_PORT: int(7233, 1324, 32767),
    CLUSTER_API_REPLICAS: int(2, 1, 32),
    CLUSTER_WORKERS: int(2, 1, 32),
    CLUSTER_PG_PORT: port(54339),
    CLUSTER_UI_PORT: port(8234),
    TEMPORAL_SERVER_BIN: optionalString,
    TEMPORAL_SQL_TOOL: optionalString,
    TEMPORAL_UI_SERVER_BIN: optionalString,
  },
  (e) => ({
    historyShards: e.CLUSTER_HISTORY_SHARDS,
    temporalPort: e.CLUSTER_TEMPORAL_PORT,
    apiReplicas: e.CLUSTER_API_REPLICAS,
    workers: e.CLUSTER_WORKERS,
    postgresPort: e.CLUSTER_PG_PORT,
    uiPort: e.CLUSTER_UI_PORT,
    serverBin: e.TEMPORAL_SERVER_BIN,
    sqlToolBin: e.TEMPORAL_SQL_TOOL,
    uiServerBin: e.TEMPORAL_UI_SERVER_BIN,
  }),
);

type ClusterSettings = ReturnType<typeof clusterSettings.build>;

/** What the launcher reads: the platform's settings (ports, data directory, Postgres) and its own. */
export type ClusterConfig = PlatformConfig & { cluster: ClusterSettings };

/** Parses the launcher's settings from the environment; every problem at once. */
export function loadClusterConfig(environment: Environment = process.env): ClusterConfig {
  const platform = platformSettings.parse(environment);
  const cluster = clusterSettings.parse(environment);
  const problems = [...(platform.ok ? [] : platform.problems), ...(cluster.ok ? [] : cluster.problems)];
  if (!platform.ok || !cluster.ok) throw new ConfigError(problems);
  return { ...platform.settings, cluster: cluster.settings };
}
