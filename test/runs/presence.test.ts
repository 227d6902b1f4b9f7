/**
 * Which runtime a request comes from (src/runs/presence.ts `runtimeOf`, pure), and the runner
 * settings' defaults and bounds (src/runs/runner-settings.ts).
 */
import type { Principal } from '../../src/app/http/auth';
import { runnerSettings } from '../../src/runs';
import { RUNTIME_LABEL_HEADER, runtimeOf } from '../../src/runs/presence';

const base = { userId: 'usr', organizationId: 'org', memberId: 'mem', role: 'admin' } as const;

it("names a runner token's runtime by its runner, with the label it was minted with", () => {
  const principal: Principal = { ...base, role: 'member', via: 'runner_token', runner: { id: 'rnr_1', label: 'laptop' } };
  expect(runtimeOf(principal, { 'x-den-runtime-version': 'den-runtime/0.1.0', [RUNTIME_LABEL_HEADER]: 'ignored' })).toEqual({
    runnerId: 'rnr_1',
    memberId: 'mem',
    credential: 'runner_token',
    label: 'laptop',
    version: 'den-runtime/0.1.0',
  });
});

it("names an API key's runtime by the key and the label it sends: two labels, two runtimes", () => {
  const principal: Principal = { ...base, via: 'api_key', apiKeyId: 'key_1' };
  expect(runtimeOf(principal, {})).toEqual({ runnerId: 'key_1', memberId: 'mem', credential: 'api_key', label: null, version: null });
  const a = runtimeOf(principal, { [RUNTIME_LABEL_HEADER]: 'build-a' });
  const b = runtimeOf(principal, { [RUNTIME_LABEL_HEADER]: 'build-b' });
  expect(a).toMatchObject({ label: 'build-a', runnerId: expect.stringMatching(/^key_1\.[0-9a-f]{12}$/) });
  expect(b!.runnerId).not.toBe(a!.runnerId);
  expect(runtimeOf(principal, { [RUNTIME_LABEL_HEADER]: 'build-a' })).toEqual(a);
});

it('ignores a label or version that is not 1 to 100 printable characters, and gives a session no presence', () => {
  const principal: Principal = { ...base, via: 'api_key', apiKeyId: 'key_1' };
  for (const bad of ['', 'a\nb', 'x'.repeat(101), 'héllo']) {
    expect(runtimeOf(principal, { [RUNTIME_LABEL_HEADER]: bad, 'x-den-runtime-version': bad })).toMatchObject({
      label: null,
      version: null,
    });
  }
  expect(runtimeOf({ ...base, via: 'session' }, {})).toBeUndefined();
  // A key remembered through a Postgres outage carries no id: no presence to write then.
  expect(runtimeOf({ ...base, via: 'api_key' }, {})).toBeUndefined();
});

it('reads the runner settings with their defaults, and refuses windows too short to mean anything', () => {
  expect(runnerSettings.parse({})).toEqual({
    ok: true,
    settings: { tokenTtlMs: 43_200_000, presenceWindowMs: 60_000, breaker: { failures: 5, windowMs: 300_000 } },
  });
  const refused = runnerSettings.parse({ RUNNER_TOKEN_TTL: '1s', RUNNER_PRESENCE_WINDOW: '10ms', RUNNER_BREAKER_FAILURES: '0' });
  expect(refused.ok).toBe(false);
  expect(!refused.ok && refused.problems.map((p) => p.split(':')[0])).toEqual([
    'RUNNER_TOKEN_TTL',
    'RUNNER_PRESENCE_WINDOW',
    'RUNNER_BREAKER_FAILURES',
  ]);
});
