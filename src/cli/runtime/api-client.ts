/**
 * The runtime's client of the run API: claim-next, heartbeats, events and the completion, each
 * bounded in time, with the runtime's runner token (src/cli/runtime/credential.ts). A 429 is
 * waited out for its Retry-After and sent again; a 401 is a RuntimeError (no retry fixes a
 * refused token).
 */
import type { RunClaim } from '../../runs/contract';

/** A refusal that no retry fixes (bad key, unreachable API): the CLI prints it and exits non-zero. */
export class RuntimeError extends Error {}

export interface ApiClientOptions {
  apiUrl: string;
  /** The credential's headers, read for every call (the token is renewed in the background). */
  headers: () => Record<string, string>;
  /** The claim long-poll (0 to 30 s). */
  waitSeconds: number;
  /** Aborted by Ctrl-C: a claim in flight, or a wait for Retry-After before one, ends at once. */
  stop: AbortSignal;
  log: (line: string) => void;
}

/** What a heartbeat answered: a refusal (the run no longer takes this attempt), or whether a cancel was requested. */
export type HeartbeatResult = { refused: string } | { refused?: undefined; cancelRequested: boolean };

export const BACKOFF_MS = { initial: 500, max: 10_000 };
const REQUEST_SLACK_SECONDS = 15;
/** A Retry-After the runtime takes at its word, up to this; a missing or unreadable one waits a second. */
const RETRY_AFTER_MAX_MS = 300_000;

/** Retry-After as seconds or an HTTP date, in ms from `now`. */
export function retryAfterMs(header: string | null, now = Date.now()): number {
  const seconds = header === null || header.trim() === '' ? NaN : Number(header);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : header === null ? NaN : Date.parse(header) - now;
  return Number.isFinite(ms) ? Math.min(RETRY_AFTER_MAX_MS, Math.max(0, ms)) : 1000;
}

export function sleepUnlessStopped(ms: number, stop?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    stop?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}

export type ApiClient = ReturnType<typeof apiClient>;

/** Why a token was refused, from the API's 401 (`reason`, `message`), for the operator. */
export function tokenRefusal(json: Record<string, unknown> | undefined): string {
  const reason = typeof json?.reason === 'string' ? json.reason : 'unauthorized';
  return typeof json?.message === 'string' ? `${reason}: ${json.message}` : reason;
}

/** One call of the run API: its method, path and JSON body, and what aborts it (beside its own bound). */
interface ApiCall {
  method: string;
  path: string;
  body: unknown;
  stop?: AbortSignal;
}

export function apiClient(options: ApiClientOptions) {
  const base = options.apiUrl.replace(/\/+$/, '');
  const once = async ({ method, path, body, stop }: ApiCall) => {
    // Every call is bounded: the long-poll's wait plus room for the answer.
    const timeout = AbortSignal.timeout((options.waitSeconds + REQUEST_SLACK_SECONDS) * 1000);
    return fetch(`${base}${path}`, {
      method,
      headers: { ...options.headers(), 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: stop ? AbortSignal.any([stop, timeout]) : timeout,
    });
  };
  const call = async (request: ApiCall) => {
    const { path, stop } = request;
    let response = await once(request);
    while (response.status === 429 && !stop?.aborted) {
      const wait = retryAfterMs(response.headers.get('retry-after'));
      options.log(`${path}: the API asked to slow down (429); retrying in ${wait} ms`);
      await response.body?.cancel();
      await sleepUnlessStopped(wait, stop);
      response = await once(request);
    }
    const text = await response.text();
    const json = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
    if (response.status === 401) throw new RuntimeError(`the API at ${base} refused the runner token (401 ${tokenRefusal(json)})`);
    return { status: response.status, json };
  };
  const report = async (runId: string, kind: 'events' | 'heartbeat' | 'complete', body: unknown) =>
    call({ method: 'POST', path: `/v1/automation-runs/${encodeURIComponent(runId)}/${kind}`, body });
  /** Retried until the API takes it (an ack is durable): a lost report would leave the run hanging. */
  const deliver = async (runId: string, kind: 'events' | 'complete', body: () => Record<string, unknown>): Promise<void> => {
    for (let delay = BACKOFF_MS.initial; ; delay = Math.min(BACKOFF_MS.max, delay * 2)) {
      const res = await report(runId, kind, body()).catch((error: unknown) => {
        if (error instanceof RuntimeError) throw error;
        return { status: 0, json: { error: (error as Error).message } };
      });
      if (res.status === 200) return;
      // 4xx: the run will not take it (ended, or another attempt owns it); retrying won't help.
      if (res.status >= 400 && res.status < 500) {
        options.log(`run ${runId}: ${kind === 'events' ? 'event' : 'completion'} refused (${res.status} ${JSON.stringify(res.json)})`);
        return;
      }
      await sleepUnlessStopped(delay);
    }
  };
  return {
    async claimNext(): Promise<RunClaim | undefined> {
      const res = await call({
        method: 'POST',
        path: '/v1/automation-runs/claim',
        body: { waitSeconds: options.waitSeconds },
        stop: options.stop,
      });
      if (res.status === 204) return undefined;
      if (res.status === 200) return res.json as unknown as RunClaim;
      throw new Error(`claim answered ${res.status}`);
    },
    /** `refused` (`stale_attempt`, `run_closed`…) when the run no longer takes this attempt. */
    async heartbeat(runId: string, attempt: number): Promise<HeartbeatResult> {
      const res = await report(runId, 'heartbeat', { attempt });
      if (res.status === 409 || res.status === 404) return { refused: String(res.json?.error ?? res.status) };
      if (res.status !== 200) throw new Error(`heartbeat answered ${res.status}`);
      return { cancelRequested: res.json?.cancelRequested === true };
    },
    /** One event, retried until the API takes it; `createdAt` defaults to when it is sent. */
    event: (runId: string, event: Record<string, unknown>) => deliver(runId, 'events', () => ({ createdAt: Date.now(), ...event })),
    /** The attempt's end (`POST …/complete`), retried until the API takes it; a repeat is answered 200. */
    complete: (runId: string, completion: Record<string, unknown>) => deliver(runId, 'complete', () => completion),
  };
}
