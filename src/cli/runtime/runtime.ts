/**
 * The reference runtime behind `den runtime`: it claims Slack-routed runs through the public
 * API, runs a shell command per run, and reports what the command printed. It is what the
 * README's quick start runs, and what the end-to-end test starts as a child process. It is a
 * client of the API, not part of the service: only the CLI imports it (an ESLint rule keeps the
 * rest of src/ from importing src/cli/runtime/).
 *
 * Per run: the run's `input.text` on the command's stdin, DEN_RUN_ID and DEN_RUN_ATTEMPT in its
 * environment, a heartbeat every `heartbeatMs` while it runs, then its stdout as one `assistant`
 * event and a `terminal` event: `succeeded` on exit 0, else `failed` with the tail of stderr.
 */
import { spawn } from 'node:child_process';
import type { RunClaim } from '../../runs/contract';
import { EVENT_BODY_LIMIT_BYTES, TERMINAL_ERROR_MAX_LENGTH } from '../../runs/schemas';

export interface RuntimeOptions {
  apiUrl: string;
  apiKey: string;
  /** Run with `/bin/sh -c`. */
  exec: string;
  heartbeatMs: number;
  /** The claim long-poll (0 to 30 s). */
  waitSeconds: number;
  /** After a stop request, how long the current command may still run before it is killed. */
  graceMs: number;
  /** Aborted by Ctrl-C: stop claiming, finish (or kill after the grace) the current run. */
  stop: AbortSignal;
  log: (line: string) => void;
  /** The environment the command inherits, plus DEN_RUN_ID and DEN_RUN_ATTEMPT. */
  environment: Record<string, string | undefined>;
}

/** A refusal that no retry fixes (bad key, unreachable API): the CLI prints it and exits non-zero. */
export class RuntimeError extends Error {}

/** Room left in an event body for everything but the assistant text. */
const TEXT_MAX_BYTES = EVENT_BODY_LIMIT_BYTES - 4096;
const BACKOFF_MS = { initial: 500, max: 10_000 };
const REQUEST_SLACK_SECONDS = 15;

/** fetch reports network failures as `TypeError: fetch failed` with the reason in `cause`. */
function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error)?.message ?? String(error);
}

export async function runRuntime(options: RuntimeOptions): Promise<void> {
  const api = apiClient(options);
  let backoff = BACKOFF_MS.initial;
  let reached = false;
  while (!options.stop.aborted) {
    let claim: RunClaim | undefined;
    try {
      claim = await api.claimNext();
      reached = true;
    } catch (error) {
      if (options.stop.aborted) break;
      if (error instanceof RuntimeError) throw error;
      // Never reached at all: a wrong URL or a service that is not running, not an outage.
      if (!reached) throw new RuntimeError(`cannot reach the API at ${options.apiUrl} (${describe(error)})`);
      // The API answered 503 or the connection dropped mid-way: Temporal or Postgres is
      // recovering; back off and poll again.
      options.log(`claim failed (${describe(error)}); retrying in ${backoff} ms`);
      await sleep(backoff, options.stop);
      backoff = Math.min(BACKOFF_MS.max, backoff * 2);
      continue;
    }
    backoff = BACKOFF_MS.initial;
    if (claim) await runOne(options, api, claim);
  }
}

async function runOne(options: RuntimeOptions, api: ApiClient, claim: RunClaim): Promise<void> {
  const runId = claim.run.id;
  const attempt = claim.attempt;
  options.log(`claimed run ${runId} (attempt ${attempt})`);
  const child = spawn('/bin/sh', ['-c', options.exec], {
    env: { ...options.environment, DEN_RUN_ID: runId, DEN_RUN_ATTEMPT: String(attempt) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const stdout: Buffer[] = [];
  let stdoutBytes = 0;
  let stderrTail = '';
  child.stdout.on('data', (chunk: Buffer) => {
    if (stdoutBytes < TEXT_MAX_BYTES) stdout.push(chunk);
    stdoutBytes += chunk.length;
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-TERMINAL_ERROR_MAX_LENGTH);
  });
  child.stdin.on('error', () => undefined); // A command that does not read its input.
  child.stdin.end(claim.run.input?.text ?? '');
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    child.once('close', (code, signal) => resolve({ code, signal }));
  });

  // Heartbeats while the command runs. A refused one (the lease was lost, the run ended) means
  // another attempt owns the run now: stop the command and report nothing.
  let leaseLost: string | undefined;
  const heartbeat = setInterval(() => {
    api.heartbeat(runId, attempt).then(
      (refusal) => {
        if (refusal && !leaseLost) {
          leaseLost = refusal;
          options.log(`run ${runId}: heartbeat refused (${refusal}); stopping the command`);
          child.kill('SIGTERM');
        }
      },
      (error: unknown) => options.log(`run ${runId}: heartbeat failed (${(error as Error).message})`),
    );
  }, options.heartbeatMs);

  // Ctrl-C: the current command gets the grace period, then is killed and reported failed.
  let stoppedByUs = false;
  const onStop = () => {
    options.log(`stopping: run ${runId} has ${options.graceMs} ms to finish`);
    setTimeout(() => {
      if (child.exitCode === null && child.signalCode === null) {
        stoppedByUs = true;
        child.kill('SIGKILL');
      }
    }, options.graceMs).unref();
  };
  options.stop.addEventListener('abort', onStop, { once: true });
  const result = await exited;
  clearInterval(heartbeat);
  options.stop.removeEventListener('abort', onStop);
  if (leaseLost) return;

  const text = truncateUtf8(Buffer.concat(stdout).toString('utf8'), TEXT_MAX_BYTES);
  const succeeded = result.code === 0;
  const error = result.error
    ? `could not start the command: ${result.error.message}`
    : stoppedByUs
      ? 'the runtime stopped before the command finished'
      : stderrTail.trim() || `exit ${result.code ?? result.signal}`;
  await api.event(runId, { attempt, sequence: 1, type: 'assistant', payload: { text } });
  await api.event(runId, {
    attempt,
    sequence: 2,
    type: 'terminal',
    payload: succeeded ? { status: 'succeeded' } : { status: 'failed', error: error.slice(-TERMINAL_ERROR_MAX_LENGTH) },
  });
  options.log(`run ${runId}: ${succeeded ? 'succeeded' : 'failed'}`);
}

function truncateUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  // Cut on a character boundary: decoding a cut sequence would leave a replacement character.
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes.subarray(0, maxBytes)).replace(/\uFFFD$/, '');
}

type ApiClient = ReturnType<typeof apiClient>;

function apiClient(options: RuntimeOptions) {
  const base = options.apiUrl.replace(/\/+$/, '');
  const call = async (method: string, path: string, body: unknown, stop?: AbortSignal) => {
    // Every call is bounded: the long-poll's wait plus room for the answer.
    const timeout = AbortSignal.timeout((options.waitSeconds + REQUEST_SLACK_SECONDS) * 1000);
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { 'x-api-key': options.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: stop ? AbortSignal.any([stop, timeout]) : timeout,
    });
    if (response.status === 401) throw new RuntimeError(`the API at ${base} refused the API key (401): check DEN_API_KEY`);
    const text = await response.text();
    return {
      status: response.status,
      json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined,
      retryAfterMs: retryAfterMs(response.headers.get('retry-after')),
    };
  };
  const report = async (runId: string, kind: 'events' | 'heartbeat', body: unknown) =>
    call('POST', `/v1/automation-runs/${encodeURIComponent(runId)}/${kind}`, body);
  return {
    async claimNext(): Promise<RunClaim | undefined> {
      const res = await call('POST', '/v1/automation-runs/claim', { waitSeconds: options.waitSeconds }, options.stop);
      if (res.status === 204) return undefined;
      if (res.status === 200) return res.json as unknown as RunClaim;
      throw new Error(`claim answered ${res.status}`);
    },
    /** The refusal (`stale_attempt`, `run_closed`…) when the run no longer takes this attempt. */
    async heartbeat(runId: string, attempt: number): Promise<string | undefined> {
      const res = await report(runId, 'heartbeat', { attempt });
      if (res.status === 409 || res.status === 404) return String(res.json?.error ?? res.status);
      // The organization is at its share: this beat is skipped; the next one comes at the interval.
      if (res.status === 429) return undefined;
      if (res.status !== 200) throw new Error(`heartbeat answered ${res.status}`);
      return undefined;
    },
    /** Retried until the API takes it (an ack is durable): a lost report would leave the run hanging. */
    async event(runId: string, event: Record<string, unknown>): Promise<void> {
      for (let delay = BACKOFF_MS.initial; ; delay = Math.min(BACKOFF_MS.max, delay * 2)) {
        const res = await report(runId, 'events', { ...event, createdAt: Date.now() }).catch((error: unknown) => ({
          status: 0,
          json: { error: (error as Error).message },
          retryAfterMs: undefined,
        }));
        if (res.status === 200) return;
        // Admission shed it: the API says when to come back.
        if (res.status === 429) {
          await new Promise((resolve) => setTimeout(resolve, res.retryAfterMs ?? delay));
          continue;
        }
        // 4xx: the run will not take it (ended, or another attempt owns it); retrying won't help.
        if (res.status >= 400 && res.status < 500) {
          options.log(`run ${runId}: event refused (${res.status} ${JSON.stringify(res.json)})`);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    },
  };
}

/** `Retry-After` in seconds, as milliseconds (the API never sends the date form). */
function retryAfterMs(header: string | null): number | undefined {
  const seconds = Number(header);
  return header !== null && Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

function sleep(ms: number, stop: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    stop.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}
