import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * Paths that may carry credentials. Headers are logged for requests, and bodies are never
 * logged whole, but anything that reaches a log line under these keys is censored.
 */
const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["x-slack-signature"]',
  'req.headers["x-hub-signature-256"]',
  'req.headers["x-hub-signature"]',
  'req.headers.cookie',
  '*.authorization',
  '*["x-api-key"]',
  '*.token',
  '*.apiKey',
  '*.api_key',
  '*.secret',
  '*.signingSecret',
  '*.signing_secret',
  '*.botToken',
  '*.bot_token',
  '*.refreshToken',
  '*.refresh_token',
  '*.accessToken',
  '*.access_token',
  '*.password',
  '*.client_secret',
  'token',
  'apiKey',
  'secret',
  'signingSecret',
  'botToken',
  'refreshToken',
];

export interface LoggerOptions {
  level: string;
  /** Where lines go; defaults to stdout. Tests pass a stream to read what was logged. */
  destination?: pino.DestinationStream;
  name?: string;
}

export function createLogger({ level, destination, name = 'den' }: LoggerOptions): Logger {
  return pino(
    {
      name,
      level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}
