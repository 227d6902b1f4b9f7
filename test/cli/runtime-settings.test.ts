/**
 * `den runtime`'s own settings: DEN_API_URL, DEN_API_KEY, DEN_RUNNER_TOKEN, DEN_RUNTIME_KILL_GRACE and
 * DEN_RUNTIME_STREAM_INTERVAL, and nothing of the service's config.
 */
import { ConfigError } from '../../src/app/settings';
import { retryAfterMs } from '../../src/cli/runtime/api-client';
import { loadRuntimeSettings, runtimeSettings } from '../../src/cli/runtime/settings';

it('reads exactly DEN_API_URL, DEN_API_KEY, DEN_RUNNER_TOKEN, DEN_RUNTIME_KILL_GRACE and DEN_RUNTIME_STREAM_INTERVAL', () => {
  expect(Object.keys(runtimeSettings.shape).sort()).toEqual([
    'DEN_API_KEY',
    'DEN_API_URL',
    'DEN_RUNNER_TOKEN',
    'DEN_RUNTIME_KILL_GRACE',
    'DEN_RUNTIME_STREAM_INTERVAL',
  ]);
  expect(
    loadRuntimeSettings({
      DEN_API_URL: 'https://den.example/',
      DEN_API_KEY: 'den_abc',
      DEN_RUNNER_TOKEN: 'den_rt_x',
      DEN_RUNTIME_KILL_GRACE: '10s',
    }),
  ).toEqual({
    apiUrl: 'https://den.example/',
    apiKey: 'den_abc',
    runnerToken: 'den_rt_x',
    killGraceMs: 10_000,
    streamIntervalMs: 1_000,
  });
});

it('refuses a kill grace that is not a duration, naming the variable', () => {
  expect(() => loadRuntimeSettings({ DEN_RUNTIME_KILL_GRACE: 'soon' })).toThrow(/DEN_RUNTIME_KILL_GRACE/);
});

it("reads a 429's Retry-After as seconds or a date, bounded, and a second when it says nothing usable", () => {
  expect(retryAfterMs('2')).toBe(2_000);
  expect(retryAfterMs('0')).toBe(0);
  expect(retryAfterMs(new Date(1_000_000 + 3_000).toUTCString(), 1_000_000)).toBe(3_000);
  expect(retryAfterMs('100000')).toBe(300_000);
  expect(retryAfterMs(null)).toBe(1_000);
  expect(retryAfterMs('soon')).toBe(1_000);
});

it('defaults the URL to the local API, and an empty variable counts as unset', () => {
  expect(loadRuntimeSettings({})).toEqual({
    apiUrl: 'http://127.0.0.1:8080',
    apiKey: undefined,
    runnerToken: undefined,
    killGraceMs: 5_000,
    streamIntervalMs: 1_000,
  });
  expect(loadRuntimeSettings({ DEN_API_URL: '', DEN_API_KEY: '  ' })).toEqual({
    apiUrl: 'http://127.0.0.1:8080',
    apiKey: undefined,
    runnerToken: undefined,
    killGraceMs: 5_000,
    streamIntervalMs: 1_000,
  });
});

it("ignores the service's variables, even invalid ones", () => {
  expect(loadRuntimeSettings({ PORT: 'eighty', RUN_LEASE_TIMEOUT: 'forever', DEN_API_KEY: 'den_abc' }).apiKey).toBe('den_abc');
});

it('refuses a URL that is not one, naming the variable', () => {
  expect(() => loadRuntimeSettings({ DEN_API_URL: 'not a url' })).toThrow(ConfigError);
  expect(() => loadRuntimeSettings({ DEN_API_URL: 'not a url' })).toThrow(/Invalid configuration:\n {2}- DEN_API_URL: /);
});
