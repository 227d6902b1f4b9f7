/**
 * What every `den` command shares, and what a feature's commands are handed (`cli(program,
 * context)` in its descriptor): printing JSON, the error that says what went wrong, option
 * parsers, and the context that opens the database and Temporal for a command. The context is
 * built by `den` itself (src/cli/context.ts), which knows where a running stack keeps them.
 */
import { InvalidArgumentError } from 'commander';
import type { PlatformConfig } from './config';
import type { IngressGateway } from './ingress';
import type { SecretKeys } from './secrets';
import type { Db } from './store/db';

/** Prints JSON on stdout; errors go to stderr with a non-zero exit (src/cli/den.ts). */
export function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** A refusal `den` prints as it is, without a stack. */
export class CliError extends Error {}

/** A commander option parser for counts and ids that must be whole and positive. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('must be a positive whole number');
  return n;
}

/** What a command runs with: the platform's settings, an open database, and the secret keys when it asks. */
export interface CliDatabase {
  config: PlatformConfig;
  db: Db;
  secretKey: () => Promise<SecretKeys>;
}

export interface CliContext<S = unknown> {
  /** The feature's own settings, read from the environment when a command asks (a problem stops the command). */
  settings(): S;
  /** Runs `action` with the database open, and closes it after. */
  withDatabase<T>(action: (context: CliDatabase) => Promise<T>): Promise<T>;
  /** withDatabase, plus the ingress gateway to Temporal's workflows (closed after `action` too). */
  withTemporal<T>(action: (context: CliDatabase & { ingress: IngressGateway }) => Promise<T>): Promise<T>;
}
