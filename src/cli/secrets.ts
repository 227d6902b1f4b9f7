import type { Command } from 'commander';
import { resealSlackSecrets } from '../slack';
import { CliError, print, type CliContext } from '../app/cli';

/** `den secrets rotate`: the last step of a SECRET_KEY rotation (src/app/secrets.ts). */
export function registerSecretsCommands(program: Command, context: CliContext): void {
  program
    .command('secrets')
    .description('The service secret (SECRET_KEY).')
    .command('rotate')
    .description(
      'Re-seal every stored secret with SECRET_KEY, opening each with SECRET_KEY or SECRET_KEY_PREVIOUS. ' +
        'Run it after deploying the new SECRET_KEY with the old one as SECRET_KEY_PREVIOUS; then drop SECRET_KEY_PREVIOUS. ' +
        'Prints the counts; exits non-zero if a secret opens with neither key.',
    )
    .action(() =>
      context.withDatabase(async ({ db, secretKey }) => {
        const counts = { slackConnections: await resealSlackSecrets(db, await secretKey()) };
        print(counts);
        if (counts.slackConnections.undecryptable > 0) {
          throw new CliError(
            `${counts.slackConnections.undecryptable} stored secret(s) open with neither SECRET_KEY nor SECRET_KEY_PREVIOUS`,
          );
        }
      }),
    );
}
