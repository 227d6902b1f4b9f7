/**
 * The Temporal server of the production topology: Temporal's own `server` program (all four
 * services, frontend, history, matching and worker, in one process) with deploy/temporal/
 * cluster.yaml, persisting to Postgres over CLUSTER_HISTORY_SHARDS shards. Unlike the dev server
 * it starts with no namespace and takes no --search-attribute flags: both are registered here.
 */
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { childEnvironment } from '../app/config';
import type { ClusterConfig } from './settings';
import type { Logger } from '../app/log';
import { SEARCH_ATTRIBUTES } from '../main/features';
import { reachable } from '../app/temporal/dev-server';
import { ensureSearchAttributes } from '../app/temporal/search-attributes';
import type { ClusterPostgres } from './postgres';
import { startProcess, waitUntil, type ManagedProcess } from './process';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');
export const TEMPORAL_CONFIG_DIR = path.join(REPO_ROOT, 'deploy', 'temporal');
/** How long closed workflows stay visible (and their histories kept) before Temporal deletes them. */
const NAMESPACE_RETENTION = '3 days';

export async function startTemporalServer(options: {
  config: ClusterConfig;
  binary: string;
  postgres: ClusterPostgres;
  logDir: string;
}): Promise<ManagedProcess & { address: string }> {
  const { config, postgres } = options;
  const address = `127.0.0.1:${config.cluster.temporalPort}`;
  const server = await startProcess({
    name: 'temporal-server',
    command: options.binary,
    // --allow-no-auth: no authorizer is configured; the frontend listens on loopback only.
    args: ['--root', REPO_ROOT, '--config', path.relative(REPO_ROOT, TEMPORAL_CONFIG_DIR), '--env', 'cluster', '--allow-no-auth', 'start'],
    cwd: REPO_ROOT,
    env: childEnvironment({
      TEMPORAL_HISTORY_SHARDS: String(config.cluster.historyShards),
      TEMPORAL_FRONTEND_PORT: String(config.cluster.temporalPort),
      TEMPORAL_DB_HOST: postgres.host,
      TEMPORAL_DB_PORT: String(postgres.port),
      TEMPORAL_DB_USER: postgres.user,
      TEMPORAL_DB_PASSWORD: postgres.password,
      TEMPORAL_DYNAMIC_CONFIG: path.join(TEMPORAL_CONFIG_DIR, 'dynamicconfig.yaml'),
    }),
    logFile: path.join(options.logDir, 'temporal-server.log'),
  });
  try {
    await waitUntil('the Temporal frontend answered', () => reachable(address, 1000), { process: server, timeoutMs: 120_000 });
  } catch (error) {
    await server.stop();
    throw error;
  }
  return Object.assign(server, { address });
}

/**
 * Registers the namespace (a no-op when it exists) and the service's search attributes, then
 * waits until the frontend serves the namespace: its namespace cache refreshes every few
 * seconds, and a workflow started before that is refused with "namespace not found".
 */
export async function ensureNamespace(address: string, namespace: string, log: Logger): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    try {
      await connection.workflowService.registerNamespace({
        namespace,
        workflowExecutionRetentionPeriod: msToTs(NAMESPACE_RETENTION),
        description: 'den control plane (npm run cluster)',
      });
      log.info({ namespace }, 'registered the Temporal namespace');
    } catch (error) {
      // ALREADY_EXISTS: an earlier start registered it.
      if ((error as { code?: number }).code !== 6) throw error;
    }
    await waitUntil(
      `namespace ${namespace} is served`,
      async () => {
        try {
          await connection.workflowService.countWorkflowExecutions({ namespace });
          return true;
        } catch {
          return false;
        }
      },
      { timeoutMs: 60_000 },
    );
    await ensureSearchAttributes({ connection, namespace }, SEARCH_ATTRIBUTES, log);
  } finally {
    await connection.close();
  }
}
