import { ConfigError } from '../app/settings';
import { loadConfig, type Config } from '../main/config';

/** The entry points' configuration: every problem at once on stderr, and exit code 2. */
export function loadConfigOrExit(): Config;
export function loadConfigOrExit<C>(load: () => C): C;
export function loadConfigOrExit(load: () => unknown = loadConfig): unknown {
  try {
    return load();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
}
