/**
 * One run's command as the runtime drives it: a shell in a process group of its own (so a stop
 * reaches whatever it started, not only the shell), its output gathered as it arrives, and the
 * reports of one attempt sent strictly in sequence.
 */
import { spawn } from 'node:child_process';
import { EVENT_BODY_LIMIT_BYTES, TERMINAL_ERROR_MAX_LENGTH } from '../../runs/schemas';
import type { ApiClient } from './api-client';

/** Room left in an event body for everything but the assistant text. */
const TEXT_MAX_BYTES = EVENT_BODY_LIMIT_BYTES - 4096;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

export interface RunningCommand {
  /** The standard output so far, cut to what one event carries. */
  text(): string;
  stderrTail(): string;
  exited: Promise<Exit>;
  done(): boolean;
  /** Signals the command's whole process group. */
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM now, SIGKILL after `graceMs` if the group is still there. */
  stop(graceMs: number): void;
}

export function startCommand(exec: string, environment: Record<string, string | undefined>, input: string): RunningCommand {
  const child = spawn('/bin/sh', ['-c', exec], { env: environment, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  const stdout: Buffer[] = [];
  let stdoutBytes = 0;
  let stderrTail = '';
  let finished = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (stdoutBytes < TEXT_MAX_BYTES) stdout.push(chunk);
    stdoutBytes += chunk.length;
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-TERMINAL_ERROR_MAX_LENGTH);
  });
  child.stdin.on('error', () => undefined); // A command that does not read its input.
  child.stdin.end(input);
  const exited = new Promise<Exit>((resolve) => {
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    child.once('close', (code, signal) => resolve({ code, signal }));
  }).finally(() => (finished = true));
  const signal = (name: NodeJS.Signals) => {
    try {
      // The negative pid is the process group the detached shell leads.
      if (child.pid !== undefined) process.kill(-child.pid, name);
    } catch {
      // Already gone.
    }
  };
  return {
    text: () => truncateUtf8(Buffer.concat(stdout).toString('utf8'), TEXT_MAX_BYTES),
    stderrTail: () => stderrTail,
    exited,
    done: () => finished,
    signal,
    stop(graceMs) {
      signal('SIGTERM');
      setTimeout(() => signal('SIGKILL'), graceMs).unref();
    },
  };
}

function truncateUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  // Cut on a character boundary: decoding a cut sequence would leave a replacement character.
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes.subarray(0, maxBytes)).replace(/\uFFFD$/, '');
}

/**
 * The events of one attempt, numbered from 1 and sent one after another. Progress is the text so
 * far as an `assistant` event, skipped while one is still on its way (so a slow API never piles
 * them up) or when nothing changed; the finish sends the whole text, unless that was the last
 * one sent (or it is empty), then the attempt's completion, which the run orders after them.
 */
export class AttemptReporter {
  private sequence = 0;
  private chain: Promise<void> = Promise.resolve();
  private sending = false;
  private lastText: string | undefined;
  /** A report that failed for good (a refused key): kept, so no promise is left rejected unawaited. */
  private failure: unknown;

  constructor(
    private readonly api: ApiClient,
    private readonly runId: string,
    private readonly attempt: number,
  ) {}

  progress(text: string): void {
    if (this.sending || text === '' || text === this.lastText) return;
    this.sending = true;
    this.assistant(text);
    this.chain = this.chain.finally(() => (this.sending = false));
  }

  async finish(text: string, completion: Record<string, unknown>): Promise<void> {
    if (text !== this.lastText && text !== '') this.assistant(text);
    this.chain = this.chain.then(async () => {
      if (this.failure === undefined) {
        await this.api
          .complete(this.runId, { attempt: this.attempt, ...completion })
          .catch((error: unknown) => void (this.failure = error));
      }
    });
    await this.chain;
    if (this.failure !== undefined) throw this.failure;
  }

  private assistant(text: string): void {
    this.lastText = text;
    this.send('assistant', { text });
  }

  private send(type: string, payload: Record<string, unknown>): void {
    // Stamped when the runtime decided to report it, not when a slow API finally took it.
    const event = { attempt: this.attempt, sequence: ++this.sequence, type, payload, createdAt: Date.now() };
    this.chain = this.chain.then(async () => {
      if (this.failure === undefined) await this.api.event(this.runId, event).catch((error: unknown) => void (this.failure = error));
    });
  }
}
