import { Command, InvalidArgumentError } from 'commander';
import { CliError } from '../../app/cli';
import { RuntimeError, runRuntime } from './runtime';
import { loadRuntimeSettings } from './settings';

function seconds(min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`must be a number of seconds from ${min} to ${max}`);
    return n;
  };
}

/** `den runtime`: the reference runtime (src/cli/runtime/runtime.ts), with its own settings (src/cli/runtime/settings.ts). */
export function registerRuntimeCommands(program: Command): void {
  program
    .command('runtime')
    .description(
      "Claim queued automation runs (Slack mentions) and run a command for each: the run's input on stdin, " +
        "its stdout reported as the answer as it grows. A cancelled run's command is stopped (SIGTERM, then SIGKILL after " +
        'DEN_RUNTIME_KILL_GRACE). Ctrl-C stops claiming and lets the current command finish.',
    )
    .requiredOption('--exec <command>', 'the shell command to run per run (for example "tr a-z A-Z")')
    .option('--api-url <url>', 'the API (default DEN_API_URL, else http://127.0.0.1:8080)')
    .option('--api-key <key>', 'an organization API key (default DEN_API_KEY)')
    .option('--heartbeat-interval <seconds>', 'heartbeat period while a command runs', seconds(1, 60), 10)
    .option('--wait <seconds>', 'claim long-poll', seconds(0, 30), 20)
    .option('--grace <seconds>', 'after Ctrl-C, how long the current command may still run', seconds(0, 3600), 30)
    .action(async (options: { exec: string; apiUrl?: string; apiKey?: string; heartbeatInterval: number; wait: number; grace: number }) => {
      const settings = loadRuntimeSettings();
      const apiKey = options.apiKey ?? settings.apiKey;
      if (!apiKey) throw new CliError('no API key: pass --api-key or set DEN_API_KEY (npx den api-keys create …)');
      const apiUrl = options.apiUrl ?? settings.apiUrl;
      const controller = new AbortController();
      let interrupts = 0;
      const onSignal = () => {
        interrupts += 1;
        if (interrupts > 1) process.exit(130);
        process.stderr.write('den runtime: stopping (Ctrl-C again to exit at once)\n');
        controller.abort();
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      process.stderr.write(`den runtime: claiming runs from ${apiUrl}\n`);
      try {
        await runRuntime({
          apiUrl,
          apiKey,
          exec: options.exec,
          heartbeatMs: options.heartbeatInterval * 1000,
          waitSeconds: options.wait,
          graceMs: options.grace * 1000,
          killGraceMs: settings.killGraceMs,
          streamIntervalMs: settings.streamIntervalMs,
          stop: controller.signal,
          log: (line) => process.stderr.write(`den runtime: ${line}\n`),
          // The command inherits the runtime's environment: passing it on, not reading config.
          environment: process.env, // eslint-disable-line no-restricted-properties
        });
      } catch (error) {
        if (error instanceof RuntimeError) throw new CliError(error.message);
        throw error;
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
      process.stderr.write('den runtime: stopped\n');
    });
}
