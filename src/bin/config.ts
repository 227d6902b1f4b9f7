import { ConfigError, loadConfig, type Config } from '../app/config';

/** The entry points' configuration: every problem at once on stderr, and exit code 2. */
export function loadConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
}
