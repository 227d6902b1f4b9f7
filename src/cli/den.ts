/**
 * `den`: the operator CLI. JSON on stdout; a clear message on stderr and a non-zero exit on
 * error. Works whether or not `npm start` is running (see context.ts).
 */
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../app/settings';
import { AppError } from '../app/errors';
import { IdentityError } from '../identity/store';
import { CliError } from '../app/cli';
import { cliContext } from './context';
import { featureSettings } from '../main/config';
import { FEATURES } from '../main/features';
import { registerRuntimeCommands } from './runtime';
import { registerSecretsCommands } from './secrets';
import { registerSlackLinkCommand } from './slack-link';

export function buildProgram(): Command {
  const program = new Command('den')
    .description('Operate the den control plane: organizations, members, API keys, sessions and integrations.')
    .showHelpAfterError()
    .exitOverride();
  for (const feature of FEATURES) feature.cli?.(program, { ...cliContext, settings: () => featureSettings(feature) });
  registerRuntimeCommands(program);
  // A client of the API beside the Slack feature's operator commands, under the same `den slack`.
  registerSlackLinkCommand(program);
  registerSecretsCommands(program, { ...cliContext, settings: () => undefined });
  return program;
}

async function run(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv);
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
