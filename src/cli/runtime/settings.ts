/**
 * What `den runtime` reads from the environment: where the API is, the key it mints its runner
 * token with (or a runner token minted elsewhere), and how long a cancelled command has between
 * SIGTERM and SIGKILL. `den slack link` reads the first
 * two. Both are clients of the API, not part of the service, so they parse only this slice and
 * never the service's settings: a service variable they do not use cannot stop them.
 */
import { z } from 'zod';
import { defineSettings, duration, optionalString, parseSettings, type Environment } from '../../app/settings';

export const runtimeSettings = defineSettings(
  {
    DEN_API_URL: z.string().url().default('http://127.0.0.1:8080'),
    DEN_API_KEY: optionalString,
    // A runner token minted elsewhere (POST /v1/automation-runners/token): the runtime needs no API key then.
    DEN_RUNNER_TOKEN: optionalString,
    // A cancelled run's command gets SIGTERM, then SIGKILL once this has passed.
    DEN_RUNTIME_KILL_GRACE: duration('5s'),
    // How often the output so far is reported while a command runs, at most.
    DEN_RUNTIME_STREAM_INTERVAL: duration('1s'),
  },
  (e) => ({
    apiUrl: e.DEN_API_URL,
    apiKey: e.DEN_API_KEY,
    runnerToken: e.DEN_RUNNER_TOKEN,
    killGraceMs: e.DEN_RUNTIME_KILL_GRACE,
    streamIntervalMs: e.DEN_RUNTIME_STREAM_INTERVAL,
  }),
);

/** Parses an environment (process.env by default); every problem is reported at once. */
export function loadRuntimeSettings(environment: Environment = process.env) {
  return parseSettings(runtimeSettings, environment);
}
