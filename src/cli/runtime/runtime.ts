/**
 * The reference runtime behind `den runtime`: it claims Slack-routed runs through the public
 * API, runs a shell command per run, and reports what the command printed. It is what the
 * README's quick start runs, and what the end-to-end test starts as a child process. It is a
 * client of the API, not part of the service: only the CLI imports it (an ESLint rule keeps the
 * rest of src/ from importing src/cli/runtime/).
 *
 * It calls the API with a runner token of its own (src/cli/runtime/credential.ts): minted at start
 * with the member's API key, which it then drops, and renewed before it expires. Neither reaches
 * its log or the commands it runs (their environment has no DEN_API_KEY or DEN_RUNNER_TOKEN).
 *
 * Per run: the run's `input.text` on the command's stdin, DEN_RUN_ID and DEN_RUN_ATTEMPT in its
 * environment, and DEN_RUN_CONTEXT naming a JSON file of `{input, context}` (the thread the run was
 * asked in, src/cli/runtime/run-context.ts), a heartbeat every `heartbeatMs` while it runs, its stdout so far as an `assistant`
 * event at most once per `streamIntervalMs` (a member watches the answer grow), then the whole
 * stdout as the last `assistant` event and the run's completion (`POST …/complete`): `succeeded`
 * on exit 0, else `failed` with the tail of stderr and what failed (`failure`): `task` when the
 * command exited non-zero after printing an answer, `runtime` when it crashed (a signal), exited
 * without an answer, could not start, or the runtime stopped it. A heartbeat reply that says the
 * run was asked to stop ends the command (SIGTERM, SIGKILL after `killGraceMs`) and completes it
 * `cancelled`.
 */
import type { RunClaim } from '../../runs/contract';
import { TERMINAL_ERROR_MAX_LENGTH } from '../../runs/schemas';
import { BACKOFF_MS, RuntimeError, apiClient, sleepUnlessStopped, type ApiClient } from './api-client';
import { RunnerCredential, firstToken } from './credential';
import { AttemptReporter, startCommand, type Exit, type RunningCommand } from './execution';
import { writeRunContext } from './run-context';

export { RuntimeError } from './api-client';

/** The variables that hold the runtime's credentials: never handed to a command. */
const CREDENTIAL_VARIABLES = ['DEN_API_KEY', 'DEN_RUNNER_TOKEN'];

export interface RuntimeOptions {
  apiUrl: string;
  /**
   * The API key, handed over once (the getter forgets it) to mint the runtime's token; else a
   * runner token minted elsewhere, renewed at start.
   */
  credentials: { takeApiKey: () => string | undefined; token?: string };
  /** The runner's name in the runners list. */
  label?: string;
  /** Run with `/bin/sh -c`. */
  exec: string;
  heartbeatMs: number;
  /** The claim long-poll (0 to 30 s). */
  waitSeconds: number;
  /** After a stop request, how long the current command may still run before it is killed. */
  graceMs: number;
  /** After a cancel, how long the command has between SIGTERM and SIGKILL. */
  killGraceMs: number;
  /** How often the output so far is reported while the command runs, at most (DEN_RUNTIME_STREAM_INTERVAL). */
  streamIntervalMs: number;
  /** Aborted by Ctrl-C: stop claiming, finish (or kill after the grace) the current run. */
  stop: AbortSignal;
  log: (line: string) => void;
  /** The environment the command inherits, without the credentials, plus DEN_RUN_ID and DEN_RUN_ATTEMPT. */
  environment: Record<string, string | undefined>;
}

/** The runtime's own runner token, from the API key (dropped then) or the token it was given. */
async function openCredential(options: RuntimeOptions): Promise<RunnerCredential> {
  const apiKey = options.credentials.takeApiKey();
  const given = apiKey !== undefined ? { apiKey } : { token: options.credentials.token ?? '' };
  try {
    return new RunnerCredential(await firstToken(options.apiUrl, given, options.label), { apiUrl: options.apiUrl, log: options.log });
  } catch (error) {
    if (error instanceof RuntimeError) throw error;
    // fetch reports an unreachable API as a TypeError; any other failure is the API's answer.
    if (error instanceof TypeError) throw new RuntimeError(`cannot reach the API at ${options.apiUrl} (${describe(error)})`);
    throw new RuntimeError(`the API at ${options.apiUrl} could not give a runner token (${(error as Error).message}); retry later`);
  }
}

/** fetch reports network failures as `TypeError: fetch failed` with the reason in `cause`. */
function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error)?.message ?? String(error);
}

export async function runRuntime(options: RuntimeOptions): Promise<void> {
  const credential = await openCredential(options);
  credential.keepRenewed(options.stop);
  options.log(`claiming runs from ${options.apiUrl} as runner ${credential.runnerId}`);
  const environment = Object.fromEntries(Object.entries(options.environment).filter(([name]) => !CREDENTIAL_VARIABLES.includes(name)));
  const api = apiClient({ ...options, headers: () => credential.headers() });
  const runtime = { ...options, environment };
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
      await sleepUnlessStopped(backoff, options.stop);
      backoff = Math.min(BACKOFF_MS.max, backoff * 2);
      continue;
    }
    backoff = BACKOFF_MS.initial;
    if (claim) await runOne(runtime, api, claim);
  }
}

/** Why the command ended early, if it did: the run's own request, a lost lease, or Ctrl-C past its grace. */
interface Interruptions {
  cancelled: boolean;
  leaseLost?: string;
  killedAfterGrace: boolean;
}

async function runOne(options: RuntimeOptions, api: ApiClient, claim: RunClaim): Promise<void> {
  const runId = claim.run.id;
  const attempt = claim.attempt;
  options.log(`claimed run ${runId} (attempt ${attempt})`);
  const context = await writeRunContext(claim.run);
  const environment = { ...options.environment, DEN_RUN_ID: runId, DEN_RUN_ATTEMPT: String(attempt), DEN_RUN_CONTEXT: context.path };
  const command = startCommand(options.exec, environment, claim.run.input?.text ?? '');
  const reporter = new AttemptReporter(api, runId, attempt);
  const seen: Interruptions = { cancelled: false, killedAfterGrace: false };

  const stream = setInterval(() => reporter.progress(command.text()), options.streamIntervalMs);
  const heartbeat = setInterval(() => void heartbeatOnce(options, api, { command, runId, attempt, seen }), options.heartbeatMs);
  // Ctrl-C: the current command gets the grace period, then is killed and reported failed.
  const onStop = () => {
    options.log(`stopping: run ${runId} has ${options.graceMs} ms to finish`);
    setTimeout(() => {
      if (command.done()) return;
      seen.killedAfterGrace = true;
      command.signal('SIGKILL');
    }, options.graceMs).unref();
  };
  options.stop.addEventListener('abort', onStop, { once: true });
  const result = await command.exited;
  await context.remove();
  clearInterval(stream);
  clearInterval(heartbeat);
  options.stop.removeEventListener('abort', onStop);
  // Another attempt owns the run now: report nothing.
  if (seen.leaseLost) return;

  const completion = completionOf(result, command, seen);
  await reporter.finish(command.text(), completion);
  options.log(`run ${runId}: ${String(completion.status)}`);
}

/** The attempt a heartbeat is for: its command, its run and number, and what interrupted it so far. */
interface LiveAttempt {
  command: RunningCommand;
  runId: string;
  attempt: number;
  seen: Interruptions;
}

/**
 * One heartbeat. A refusal (the lease was lost, the run ended) means another attempt owns the
 * run: stop the command. A reply saying the run was asked to stop: stop it, to report `cancelled`.
 */
async function heartbeatOnce(options: RuntimeOptions, api: ApiClient, { command, runId, attempt, seen }: LiveAttempt): Promise<void> {
  let result;
  // A failed heartbeat (503, or no answer) is sent again once, half an interval later: with the
  // API forwarding one heartbeat in five to a run's workflow, waiting for the next interval could
  // let the lease run out.
  for (let tries = 1; ; tries++) {
    try {
      result = await api.heartbeat(runId, attempt);
      break;
    } catch (error) {
      options.log(`run ${runId}: heartbeat failed (${(error as Error).message})`);
      if (tries === 2 || command.done()) return;
      await sleepUnlessStopped(options.heartbeatMs / 2, options.stop);
    }
  }
  if (command.done() || seen.cancelled || seen.leaseLost) return;
  if (result.refused !== undefined) {
    seen.leaseLost = result.refused;
    options.log(`run ${runId}: heartbeat refused (${result.refused}); stopping the command`);
    command.signal('SIGTERM');
  } else if (result.cancelRequested) {
    seen.cancelled = true;
    options.log(`run ${runId}: cancel requested; stopping the command (SIGKILL after ${options.killGraceMs} ms)`);
    command.stop(options.killGraceMs);
  }
}

/**
 * How the run ends. A failure says what failed: `task` for a command that exited non-zero after
 * printing an answer (the work failed, the runtime did its job); `runtime` for one that could not
 * start, was killed by a signal, exited without an answer, or that the runtime itself stopped.
 */
function completionOf(result: Exit, command: RunningCommand, seen: Interruptions): Record<string, unknown> {
  if (seen.cancelled) return { status: 'cancelled' };
  if (result.code === 0) return { status: 'succeeded' };
  const error = result.error
    ? `could not start the command: ${result.error.message}`
    : seen.killedAfterGrace
      ? 'the runtime stopped before the command finished'
      : command.stderrTail().trim() || `exit ${result.code ?? result.signal}`;
  const answered = result.error === undefined && !seen.killedAfterGrace && result.signal === null && command.text().trim() !== '';
  return { status: 'failed', error: error.slice(-TERMINAL_ERROR_MAX_LENGTH), failure: answered ? 'task' : 'runtime' };
}
