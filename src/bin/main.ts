import type { Config } from '../main/config';
import { loadConfigOrExit } from './config';
import { createLogger, type Logger } from '../app/log';
import { startService } from '../main/compose';
import { onStopSignals } from './signals';

/**
 * Shared entry for start/serve/worker: validate config (every problem at once, exit non-zero),
 * start, print where things are, and shut down in order on SIGINT/SIGTERM (see signals.ts).
 */
export async function main(options: {
  name: string;
  roles: { api: boolean; worker: boolean };
  /** `npm start` may start embedded servers; serve/worker only with EMBEDDED=true. */
  allowEmbedded: (config: Config) => boolean;
}): Promise<void> {
  const config = loadConfigOrExit();
  const log: Logger = createLogger({ level: config.logLevel, name: options.name });
  const started = Date.now();
  let service: Awaited<ReturnType<typeof startService>>;
  try {
    service = await startService({ config, log, roles: options.roles, allowEmbedded: options.allowEmbedded(config) });
  } catch (error) {
    log.fatal({ err: error }, 'start-up failed');
    process.exit(1);
  }
  const urls = {
    api: service.http?.url,
    docs: service.http ? `${service.http.url}/docs` : undefined,
    temporalUi: service.dependencies.temporalUiUrl,
    temporal: service.dependencies.temporalAddress,
  };
  log.info({ ...urls, startupMs: Date.now() - started }, 'ready');
  if (process.stdout.isTTY) {
    process.stdout.write(
      [
        '',
        service.http ? `  API          ${urls.api}` : undefined,
        service.http ? `  API docs     ${urls.docs}` : undefined,
        urls.temporalUi ? `  Temporal UI  ${urls.temporalUi}` : `  Temporal     ${urls.temporal}`,
        '',
      ]
        .filter((line) => line !== undefined)
        .join('\n') + '\n',
    );
  }

  onStopSignals({
    stop: (signal) => {
      log.info({ signal }, 'shutting down');
      service.stop().then(
        () => {
          log.info('stopped');
          process.exit(0);
        },
        (error: unknown) => {
          log.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
    },
    force: (signal) => {
      log.warn({ signal }, 'second signal: forcing exit');
      process.exit(130);
    },
  });
}
