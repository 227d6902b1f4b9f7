/** `den runtime`'s own settings: DEN_API_URL and DEN_API_KEY, and nothing of the service's config. */
import { ConfigError } from '../../src/app/settings';
import { loadRuntimeSettings, runtimeSettings } from '../../src/cli/runtime/settings';

it('reads exactly DEN_API_URL and DEN_API_KEY', () => {
  expect(Object.keys(runtimeSettings.shape).sort()).toEqual(['DEN_API_KEY', 'DEN_API_URL']);
  expect(loadRuntimeSettings({ DEN_API_URL: 'https://den.example/', DEN_API_KEY: 'den_abc' })).toEqual({
    apiUrl: 'https://den.example/',
    apiKey: 'den_abc',
  });
});

it('defaults the URL to the local API, and an empty variable counts as unset', () => {
  expect(loadRuntimeSettings({})).toEqual({ apiUrl: 'http://127.0.0.1:8080', apiKey: undefined });
  expect(loadRuntimeSettings({ DEN_API_URL: '', DEN_API_KEY: '  ' })).toEqual({ apiUrl: 'http://127.0.0.1:8080', apiKey: undefined });
});

it("ignores the service's variables, even invalid ones", () => {
  expect(loadRuntimeSettings({ PORT: 'eighty', RUN_LEASE_TIMEOUT: 'forever', DEN_API_KEY: 'den_abc' }).apiKey).toBe('den_abc');
});

it('refuses a URL that is not one, naming the variable', () => {
  expect(() => loadRuntimeSettings({ DEN_API_URL: 'not a url' })).toThrow(ConfigError);
  expect(() => loadRuntimeSettings({ DEN_API_URL: 'not a url' })).toThrow(/Invalid configuration:\n {2}- DEN_API_URL: /);
});
