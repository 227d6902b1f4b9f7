/**
 * `den`: the operator CLI. JSON on stdout; a clear message on stderr and a non-zero exit on
 * error. Works whether or not `npm start` is running (see context.ts).
 */
import { CommanderError, type Command } from 'commander';
import { ConfigError } from '../app/settings';
import { AppError } from '../app/errors';
import { IdentityError } from '../identity/store';
import { CliError } from '../app/cli';

/**
 * `den runtime` runs on a member's machine and needs none of the operator side (the features,
 * Postgres, Temporal): it loads only its own commands, so it starts in a fraction of the time.
 * Every other command, and `den --help`, loads them all (src/cli/program.ts).
 */
function programFor(argv: string[]): Command {
  // require(), not import(): tsx runs the sources as CommonJS, and Node's import() would bypass it.
  /* eslint-disable @typescript-eslint/no-require-imports */
  if (argv[2] === 'runtime') {
    const { emptyProgram } = require('./empty-program') as typeof import('./empty-program');
    const { registerRuntimeCommands } = require('./runtime') as typeof import('./runtime');
    const program = emptyProgram();
    registerRuntimeCommands(program);
    return program;
  }
  return (require('./program') as typeof import('./program')).buildProgram();
  /* eslint-enable @typescript-eslint/no-require-imports */
}

async function run(argv: string[]): Promise<number> {
  try {
    await programFor(argv).parseAsync(argv);
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode;
    const expected = error instanceof CliError || error instanceof IdentityError || error instanceof ConfigError;
    // A dependency outage (AppError 503) says which one, as the API would.
    const outage = error instanceof AppError && error.dependency ? `${error.dependency} is unavailable; retry later` : undefined;
    process.stderr.write(`den: ${outage ?? (expected ? (error as Error).message : String((error as Error)?.stack ?? error))}\n`);
    return 1;
  }
}

if (require.main === module || require.main?.filename.endsWith('bin/den.js')) {
  void run(process.argv).then((code) => process.exit(code));
}
