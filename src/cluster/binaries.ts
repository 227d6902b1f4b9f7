/**
 * The three Temporal programs the production topology runs, built from the Go module proxy the
 * way the dev server's CLI is (src/app/temporal/go-binaries.ts). v1.29.1 is the server inside
 * the CLI v1.5.1 the dev server runs, so the module cache is mostly warm and tests, benchmarks
 * and the cluster all run the same server code. The UI server v2.42.1 is the one that CLI embeds.
 */
import type { ClusterConfig } from './settings';
import type { Logger } from '../app/log';
import { findOrInstall } from '../app/temporal/go-binaries';

export const TEMPORAL_SERVER_VERSION = '1.29.1';
const TEMPORAL_SERVER_MODULE = `go.temporal.io/server/cmd/server@v${TEMPORAL_SERVER_VERSION}`;
const TEMPORAL_SQL_TOOL_MODULE = `go.temporal.io/server/cmd/tools/sql@v${TEMPORAL_SERVER_VERSION}`;
const TEMPORAL_UI_SERVER_MODULE = 'github.com/temporalio/ui-server/v2/cmd/server@v2.42.1';

export interface ClusterBinaries {
  server: string;
  sqlTool: string;
  uiServer: string | undefined;
}

/** Finds or builds each program; the Web UI is optional (the cluster runs without it). */
export async function clusterBinaries(config: ClusterConfig, log: Logger): Promise<ClusterBinaries> {
  const server = await findOrInstall({
    configured: config.cluster.serverBin,
    configuredBy: 'TEMPORAL_SERVER_BIN',
    name: 'server',
    module: TEMPORAL_SERVER_MODULE,
    log,
  });
  const sqlTool = await findOrInstall({
    configured: config.cluster.sqlToolBin,
    configuredBy: 'TEMPORAL_SQL_TOOL',
    name: 'sql',
    module: TEMPORAL_SQL_TOOL_MODULE,
    log,
  });
  let uiServer: string | undefined;
  try {
    uiServer = await findOrInstall({
      configured: config.cluster.uiServerBin,
      configuredBy: 'TEMPORAL_UI_SERVER_BIN',
      name: 'server',
      module: TEMPORAL_UI_SERVER_MODULE,
      // Its program is also called `server`: keep it out of the Temporal server's way.
      subdir: 'ui-server-v2.42.1',
      log,
    });
  } catch (error) {
    log.warn({ err: error }, 'the Temporal Web UI server could not be built; the cluster runs without it');
  }
  return { server, sqlTool, uiServer };
}
