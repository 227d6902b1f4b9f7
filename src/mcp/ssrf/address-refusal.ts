/**
 * What the guard says when an address is refused. The answer goes back to whoever asked (an
 * admin's MCP resolve), so it names only the host they gave and says its address is not allowed;
 * which address a name resolved to, and the range that refused it, are the `detail`, for the
 * server's log only (an internal name's private address is not the caller's to learn).
 */
import type { Logger } from '../../app/log';
import type { FetchFailure, FetchRecord } from './guarded-fetch';

export function addressRefusal(host: string, address: string | undefined, reason: string, afterConnect = false): FetchFailure {
  const where = afterConnect ? 'Blocked after connect' : 'Blocked';
  return {
    code: 'blocked_address',
    message: `${where}: the address of ${host} is not allowed`,
    blocked: true,
    detail: address !== undefined && address !== host ? `${where}: ${host} resolves to ${reason}` : `${where}: ${reason}`,
  };
}

/** Logs the detail of every refusal among a probe's requests: the answer itself never carries it. */
export function logRefusalDetails(log: Logger, url: string, records: readonly FetchRecord[]): void {
  for (const record of records) {
    if (record.failure?.detail)
      log.warn({ url, request: record.url, code: record.failure.code, detail: record.failure.detail }, 'mcp probe refused');
  }
}
