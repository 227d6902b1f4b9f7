import os from 'node:os';
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

interface RuntimeCommandOptions {
  exec: string;
  apiUrl?: string;
  apiKey?: string;
  label?: string;
  heartbeatInterval: number;
  wait: number;
  grace: number;
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
    .option('--api-key <key>', "the member's API key, used once to mint the runtime's own runner token (default DEN_API_KEY)")
    .option('--label <name>', "the runtime's name in the runners list (default: this machine's host name)")
    .option('--heartbeat-interval <seconds>', 'heartbeat period while a command runs', seconds(1, 60), 10)
    .option('--wait <seconds>', 'claim long-poll', seconds(0, 30), 20)
    .option('--grace <seconds>', 'after Ctrl-C, how long the current command may still run', seconds(0, 3600), 30)
    .action(async (options: RuntimeCommandOptions) => {
      const { apiKey: keyFromEnvironment, runnerToken, ...settings } = loadRuntimeSettings();
      let apiKey = options.apiKey ?? keyFromEnvironment;
      if (!apiKey && !runnerToken) {
        throw new CliError('no API key: pass --api-key or set DEN_API_KEY (npx den api-keys create …), or set DEN_RUNNER_TOKEN');
      }
      const apiUrl = options.apiUrl ?? settings.apiUrl;
      // Handed over once, to mint the runtime's token: the runtime keeps only the token.
      const takeApiKey = () => {
        const key = apiKey;
        apiKey = undefined;
        return key;
      };
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
      try {
        await runRuntime({
          apiUrl,
          credentials: { takeApiKey, token: runnerToken },
          label: options.label ?? os.hostname(),
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
