/** `den` with no commands yet, as it and its help describe it; src/cli/program.ts adds them all. */
import { Command } from 'commander';

export function emptyProgram(): Command {
  return new Command('den')
    .description('Operate the den control plane: organizations, members, API keys, sessions and integrations.')
    .showHelpAfterError()
    .exitOverride();
}
