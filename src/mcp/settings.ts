/** MCP resolve's settings: preregistered OAuth clients, the private-network policy and the probe's bounds. */
import { z } from 'zod';
import { bool, defineSettings, duration } from '../app/settings';

const preregisteredClients = z
  .string()
  .default('{}')
  .transform((value, ctx) => {
    try {
      const parsed = z.record(z.string().url(), z.object({ clientId: z.string().min(1) })).safeParse(JSON.parse(value));
      if (parsed.success) return parsed.data;
      ctx.addIssue({ code: 'custom', message: 'must map server URLs to {"clientId": "..."}' });
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be JSON' });
    }
    return z.NEVER;
  });

const originList = z
  .string()
  .default('')
  .transform((value, ctx) => {
    const origins: string[] = [];
    for (const raw of value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      try {
        const url = new URL(raw);
        origins.push(url.origin);
      } catch {
        ctx.addIssue({ code: 'custom', message: `"${raw}" is not an origin such as http://127.0.0.1:39123` });
      }
    }
    return origins;
  });

export const mcpSettings = defineSettings(
  {
    MCP_PREREGISTERED_OAUTH_CLIENTS: preregisteredClients,
    MCP_ALLOW_PRIVATE_NETWORK: bool(false),
    MCP_PRIVATE_ALLOWLIST: originList,
    MCP_PROBE_TIMEOUT: duration('8s'),
    // `off`: probes resolve no host names (only IP literals and localhost), for sandboxes and
    // benchmarks that must not send a packet beyond the machine.
    MCP_DNS: z.enum(['system', 'off']).default('system'),
  },
  (e) => ({
    preregisteredClients: e.MCP_PREREGISTERED_OAUTH_CLIENTS,
    allowPrivateNetwork: e.MCP_ALLOW_PRIVATE_NETWORK,
    privateAllowlist: e.MCP_PRIVATE_ALLOWLIST,
    probeTimeoutMs: e.MCP_PROBE_TIMEOUT,
    dns: e.MCP_DNS,
  }),
);

export type McpSettings = ReturnType<typeof mcpSettings.build>;
