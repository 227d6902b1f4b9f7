/** MCP_DNS=off: the probe activity resolves no host name, so a preset probe never leaves the machine. */
import dns from 'node:dns';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createMcpActivities } from '../../activities/mcp';
import { loadConfigWith } from '../../src/main/config';
import { createLogger } from '../../src/app/log';
import { installLoopbackTripwire } from '../harness/mcp';

it('refuses to resolve host names and reports the probe unreachable', async () => {
  const tripwire = installLoopbackTripwire();
  // Never calls through: even if the switch regressed, no DNS query leaves this process.
  const lookup = jest.spyOn(dns.promises, 'lookup').mockRejectedValue(Object.assign(new Error('test: no DNS'), { code: 'ENOTFOUND' }));
  try {
    const config = loadConfigWith({ MCP_DNS: 'off', MCP_PROBE_TIMEOUT: '3s' });
    expect(config.mcp.dns).toBe('off');
    const activities = createMcpActivities({ settings: config.mcp, log: createLogger({ level: 'silent' }) });
    const result: Awaited<ReturnType<typeof activities.probeMcpCandidate>> = await new MockActivityEnvironment().run(
      activities.probeMcpCandidate,
      { url: 'https://mcp.notion.com/mcp', source: 'preset' as const },
    );
    expect(result.discovery.status).toBe('unreachable');
    expect(JSON.stringify(result.discovery.warnings)).toMatch(/mcp_unreachable/);
    // The refusal is the switch's own, not an accident of this machine's DNS: nobody asked it.
    expect(lookup).not.toHaveBeenCalled();
    expect(tripwire.violations).toEqual([]);
  } finally {
    lookup.mockRestore();
    tripwire.restore();
  }
});
