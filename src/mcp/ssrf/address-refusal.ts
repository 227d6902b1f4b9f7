/**
 * A refused address's detail (which address a name resolved to, and the range that refused it)
 * is for the server's log only; the answer names only the host (`addressRefusal` in
 * guarded-fetch.ts).
 */
import type { Logger } from '../../app/log';
import type { FetchRecord } from './guarded-fetch';

/** Logs the detail of every refusal among a probe's requests: the answer itself never carries it. */
export function logRefusalDetails(log: Logger, url: string, records: readonly FetchRecord[]): void {
  for (const record of records) {
    if (record.failure?.detail)
      log.warn({ url, request: record.url, code: record.failure.code, detail: record.failure.detail }, 'mcp probe refused');
  }
}
