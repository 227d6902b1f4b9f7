import path from 'node:path';

const root = path.resolve(__dirname, '../..');

/** The development launcher a member runs from a clone (`npx den`): the sources through tsx. */
export const DEN_LAUNCHER = path.join(root, 'bin', 'den.js');

/**
 * The `den` file tests run: the bundle of the same sources the global setup builds once per run
 * (test/setup/den-bundle.ts), or the launcher when no setup built one (a file run under another
 * config). Through tsx every start compiled the CLI again, about 2 s of CPU each time, and the
 * suite starts it a few hundred times.
 */
export function denBin(): string {
  return process.env.DEN_TEST_CLI_BUNDLE ?? DEN_LAUNCHER;
}
