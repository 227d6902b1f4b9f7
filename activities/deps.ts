import type { Config } from '../src/app/config';
import type { Logger } from '../src/app/log';
import type { SecretKeys } from '../src/app/secrets';
import type { Db } from '../src/app/store/db';
import type { TemporalClientHandle } from '../src/app/temporal/client';
import type { McpNetworkOverrides } from '../src/mcp/network';

/** What activities may use. Built once per worker process. */
export interface ActivityDeps {
  config: Config;
  db: Db;
  log: Logger;
  /** For activities that signal or start other workflows. */
  temporal: TemporalClientHandle;
  /** Key for secrets at rest (AES-256-GCM) and signed tokens. */
  secretKey: SecretKeys;
  /**
   * MCP probes' network, overridable. Production leaves it unset (system DNS); tests inject a
   * resolver that answers without DNS, so no test sends a packet beyond loopback.
   */
  mcpNetwork?: McpNetworkOverrides;
}
