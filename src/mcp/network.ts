import type { HostResolver } from './ssrf/guarded-fetch';

/**
 * Network overrides for the probe. Not configuration: tests inject a resolver that answers
 * without DNS, so no test ever sends a query or a packet beyond loopback.
 */
export interface McpNetworkOverrides {
  resolve?: HostResolver;
  /** Guard step timeouts (ms), shortened by tests. */
  guard?: { dnsTimeoutMs?: number; connectTimeoutMs?: number; responseTimeoutMs?: number; bodyIdleTimeoutMs?: number };
}
