/**
 * The Temporal Web UI for the cluster: Temporal's ui-server program (the one the CLI embeds for
 * the dev server) with deploy/temporal-ui/cluster.yaml, on 127.0.0.1:CLUSTER_UI_PORT.
 */
import path from 'node:path';
import { childEnvironment } from '../app/config';
import type { ClusterConfig } from './settings';
import { startProcess, waitUntil, type ManagedProcess } from './process';
import { REPO_ROOT } from './temporal-server';

export async function startUiServer(options: {
  config: ClusterConfig;
  binary: string;
  temporalAddress: string;
  logDir: string;
}): Promise<ManagedProcess & { url: string }> {
  const url = `http://127.0.0.1:${options.config.cluster.uiPort}`;
  const ui = await startProcess({
    name: 'temporal-ui',
    command: options.binary,
    args: ['--root', REPO_ROOT, '--config', path.join('deploy', 'temporal-ui'), '--env', 'cluster', 'start'],
    cwd: REPO_ROOT,
    env: childEnvironment({
      TEMPORAL_ADDRESS: options.temporalAddress,
      TEMPORAL_UI_PORT: String(options.config.cluster.uiPort),
      TEMPORAL_DEFAULT_NAMESPACE: options.config.temporal.namespace,
    }),
    logFile: path.join(options.logDir, 'temporal-ui.log'),
  });
  try {
    await waitUntil(
      'the Temporal Web UI answered',
      async () => {
        try {
          return (await fetch(url, { signal: AbortSignal.timeout(1000) })).ok;
        } catch {
          return false;
        }
      },
      { process: ui, timeoutMs: 30_000 },
    );
  } catch (error) {
    await ui.stop();
    throw error;
  }
  return Object.assign(ui, { url });
}
