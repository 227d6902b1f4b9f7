/**
 * What an unauthenticated or hostile client can do to the front door: nothing that
 * grows its memory, nothing answered 5xx, and no credential that half-works.
 */
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';
import { rawRequest } from '../fuzz/raw-http';

let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
beforeAll(async () => {
  stack = await startTestStack({
    removedRoutes: [{ path: '/v1/old-things/{*rest}', removedIn: '0.1.0', replacement: '/v1/automation-runs' }],
  });
  org = await createTestOrg(stack.services.database.db);
});
afterAll(() => stack.stop());

const port = () => Number(new URL(stack.url).port);
const send = (method: string, path: string, headers: [string, string][] = []) => rawRequest({ port: port(), method, path, headers });

describe('credentials are all or nothing', () => {
  it('a valid API key with an invalid bearer token is 401, and so is an invalid key with a valid session', async () => {
    const { token } = await org.session(org.owner.memberId);
    const validKeyBadBearer = await stack.request('GET', '/v1/me', {
      headers: { ...org.owner.headers, authorization: 'Bearer not-a-session' },
    });
    expect(validKeyBadBearer).toMatchObject({ status: 401, json: { error: 'unauthorized' } });
    const badKeyValidBearer = await stack.request('GET', '/v1/me', {
      headers: { 'x-api-key': 'den_nope', authorization: `Bearer ${token}` },
    });
    expect(badKeyValidBearer).toMatchObject({ status: 401, json: { error: 'unauthorized' } });
  });

  // More than one line of the same credential header is malformed, even where Node keeps only the first.
  it('two Authorization lines, valid then invalid, are 401 (and so are the reverse and two valid ones)', async () => {
    const { token } = await org.session(org.owner.memberId);
    const alone = await send('GET', '/v1/me', [['Authorization', `Bearer ${token}`]]);
    expect(alone.status).toBe(200);
    for (const pair of [
      [`Bearer ${token}`, 'Bearer not-a-session'],
      ['Bearer not-a-session', `Bearer ${token}`],
      [`Bearer ${token}`, `Bearer ${token}`],
    ]) {
      const res = await send('GET', '/v1/me', [
        ['Authorization', pair[0]!],
        ['authorization', pair[1]!],
      ]);
      expect(res.status).toBe(401);
      expect(JSON.parse(res.body.toString('utf8'))).toEqual({ error: 'unauthorized' });
    }
  });

  it('two x-api-key lines are 401, even when both carry the valid key', async () => {
    const res = await send('GET', '/v1/me', [
      ['x-api-key', org.owner.apiKey],
      ['X-Api-Key', org.owner.apiKey],
    ]);
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body.toString('utf8'))).toEqual({ error: 'unauthorized' });
  });

  it('when both are valid, the API key is the principal', async () => {
    const { token } = await org.session(org.owner.memberId);
    const both = await stack.request('GET', '/v1/me', { headers: { ...org.owner.headers, authorization: `Bearer ${token}` } });
    expect(both).toMatchObject({ status: 200, json: { via: 'api_key', memberId: org.owner.memberId } });
  });
});

describe('methods', () => {
  it.each([
    ['TRACE', '/health', 'GET, HEAD'],
    ['OPTIONS', '/v1/automation-runs', 'GET, HEAD'],
    ['PUT', '/v1/me', 'GET, HEAD'],
    ['DELETE', '/v1/webhooks/connectors/github', 'POST'],
    ['PROPFIND', '/v1/automation-runs/abc/events', 'GET, HEAD, POST'],
    // A concrete path owns its methods (OpenAPI matches it before /v1/automation-runs/{id}).
    ['GET', '/v1/automation-runs/claim', 'POST'],
    ['OPTIONS', '/v1/automation-runs/claim', 'POST'],
  ])('%s %s → 405 with Allow, never a 5xx', async (method, path, allow) => {
    const res = await send(method, path);
    expect(res.status).toBe(405);
    const allowHeader = /^allow: (.*)$/im.exec(res.headers)?.[1]?.trim().split(/,\s*/).sort().join(', ');
    expect(allowHeader).toBe(allow);
    expect(JSON.parse(res.body.toString('utf8'))).toMatchObject({ error: 'method_not_allowed' });
  });

  it('an unknown method on an unknown path is a 404', async () => {
    expect((await send('TRACE', '/v1/nowhere')).status).toBe(404);
  });

  it('routes of removed features answer 410, through an entry the test defines', async () => {
    for (const path of ['/v1/old-things/abc', '/v1/old-things/abc/events']) {
      const res = await stack.request('POST', path, { body: {} });
      expect(res.status).toBe(410);
      expect(res.json).toEqual({ error: 'gone', message: 'Removed in 0.1.0. Use /v1/automation-runs instead.' });
    }
  });
});

it('10,000 requests with random paths and methods leave /metrics the same size (±1%)', async () => {
  const methods = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'HEAD', 'PROPFIND', 'FOO', 'M-SEARCH'];
  const prefixes = ['/', '/v1/', '/v1/automation-runs/', '/v1/integrations/slack/', '/docs/assets/', '/v1/old-things/', '/health/'];
  let seed = 20261123;
  const random = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  const pick = <T>(list: T[]) => list[Math.floor(random() * list.length)]!;
  const flood = async (count: number) => {
    const statuses = new Set<number>();
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < count) {
          next += 1;
          const path = `${pick(prefixes)}${Math.floor(random() * 1e9).toString(36)}/${Math.floor(random() * 1e6)}`;
          statuses.add((await send(pick(methods), path)).status);
        }
      }),
    );
    return statuses;
  };
  // Node's GC histogram gains a series the first time each of its four GC kinds happens, at
  // moments no request controls: it is bounded, and left out of the count.
  const size = async () =>
    (await stack.request('GET', '/metrics')).text.split('\n').filter((l) => !l.includes('nodejs_gc_duration_seconds')).length;
  const series = async () =>
    new Set(
      (await stack.request('GET', '/metrics')).text.split('\n').filter((l) => l.startsWith('den_http_request_duration_seconds_count')),
    );
  // Each bounded label combination (template or `unmatched` × known method or `other` × status)
  // is seen in a first flood; a second one of the same size must add nothing.
  await flood(10_000);
  await size(); // the /metrics request's own series, recorded after its first answer
  const before = await size();
  const statuses = await flood(10_000);
  const after = await size();
  expect([...statuses].every((status) => status < 500)).toBe(true);
  // Every series is labelled by a template or `unmatched`, never a raw path.
  for (const line of await series())
    expect(line).toMatch(/route="(unmatched|\/[^"]*)",method="(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS|TRACE|CONNECT|other)"/);
  expect([...(await series())].some((line) => /route="\/[a-z0-9]{4,}\//.test(line))).toBe(false);
  expect(Math.abs(after - before)).toBeLessThanOrEqual(before * 0.01);
}, 120_000);
