/**
 * GET /v1/mcp-connections/presets over real HTTP: any member lists the catalogue, pre-registered
 * OAuth clients applied, with an ETag a repeat sends back for a 304. Three API processes: two
 * with the same MCP_PREREGISTERED_OAUTH_CLIENTS (replicas agree on the ETag) and one with other
 * clients (another ETag). The route makes no outbound connection; the tripwire would see one.
 */
import { MCP_PRESETS } from '../../src/mcp/presets';
import { startTestStack, type TestStack } from '../harness/stack';
import { createTestOrg, type TestMember } from '../harness/identity';
import { installLoopbackTripwire } from '../harness/mcp';

const PATH = '/v1/mcp-connections/presets';
const GITHUB_CLIENT = { 'https://api.githubcopilot.com/mcp': { clientId: 'Iv1.den-github-app' } };

let tripwire: ReturnType<typeof installLoopbackTripwire>;
let stack: TestStack;
let replica: TestStack;
let otherClients: TestStack;
let member: TestMember;
let memberSession: string;

beforeAll(async () => {
  tripwire = installLoopbackTripwire();
  const env = { MCP_PREREGISTERED_OAUTH_CLIENTS: JSON.stringify(GITHUB_CLIENT) };
  [stack, replica, otherClients] = await Promise.all([
    startTestStack({ env }),
    startTestStack({ env }),
    startTestStack({ env: { MCP_PREREGISTERED_OAUTH_CLIENTS: '{}' } }),
  ]);
  const org = await createTestOrg(stack.services.database.db);
  member = await org.addMember('member');
  memberSession = (await org.session(member.memberId)).token;
}, 60_000);

afterAll(async () => {
  await Promise.all([stack, replica, otherClients].map((s) => s?.stop()));
  tripwire.restore();
  expect(tripwire.violations).toEqual([]);
});

const list = (target: TestStack, headers: Record<string, string> = member.headers) => target.request('GET', PATH, { headers });

describe('access', () => {
  it('no credentials → 401 {error:"unauthorized"}', async () => {
    const res = await stack.request('GET', PATH);
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ error: 'unauthorized' });
  });

  it('a wrong API key or session → 401', async () => {
    for (const headers of [{ 'x-api-key': 'den_nope' }, { authorization: 'Bearer nope' }] as Record<string, string>[]) {
      const res = await list(stack, headers);
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ error: 'unauthorized' });
    }
  });

  it('a member (not an admin), by API key or by session → 200, the same catalogue', async () => {
    const byKey = await list(stack);
    const bySession = await list(stack, { authorization: `Bearer ${memberSession}` });
    expect(byKey.status).toBe(200);
    expect(bySession.status).toBe(200);
    expect(bySession.json).toEqual(byKey.json);
    expect(bySession.headers.get('etag')).toBe(byKey.headers.get('etag'));
  });
});

describe('the catalogue', () => {
  it('lists every preset in catalogue order, GitHub among them, each with its domains', async () => {
    const res = await list(stack);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(res.json)).toEqual(['presets']);
    expect(res.json.presets.map((p: { presetId: string }) => p.presetId)).toEqual(MCP_PRESETS.map((p) => p.presetId));
    const github = res.json.presets.find((p: { presetId: string }) => p.presetId === 'github');
    expect(github).toMatchObject({
      displayName: 'GitHub',
      url: 'https://api.githubcopilot.com/mcp/',
      authType: 'oauth',
      supportedAuthTypes: ['oauth', 'apikey'],
      domains: ['github.com'],
      docsUrl: 'https://github.com/github/github-mcp-server/blob/main/docs/remote-server.md',
    });
    const notion = res.json.presets.find((p: { presetId: string }) => p.presetId === 'notion');
    expect(notion).toEqual(MCP_PRESETS.find((p) => p.presetId === 'notion'));
    expect(notion.docsUrl).toBeUndefined();
  });

  it('applies MCP_PREREGISTERED_OAUTH_CLIENTS as resolve does', async () => {
    const github = (target: TestStack) =>
      list(target).then((res) => res.json.presets.find((p: { presetId: string }) => p.presetId === 'github'));
    expect(await github(stack)).toEqual({
      ...MCP_PRESETS.find((p) => p.presetId === 'github'),
      defaultOAuthClientId: 'Iv1.den-github-app',
      requiresOAuthClient: false,
    });
    const without = await github(otherClients);
    expect(without.requiresOAuthClient).toBe(true);
    expect(without.defaultOAuthClientId).toBeUndefined();
  });

  it('answers the same bytes every time, in the same order', async () => {
    const [a, b] = await Promise.all([list(stack), list(stack)]);
    expect(a.text).toBe(b.text);
  });
});

describe('ETag and If-None-Match', () => {
  it('carries a strong ETag and asks caches to check it again', async () => {
    const res = await list(stack);
    expect(res.headers.get('etag')).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect(res.headers.get('cache-control')).toBe('private, no-cache');
  });

  it('a repeat with If-None-Match → 304, no body, the same ETag', async () => {
    const first = await list(stack);
    const etag = first.headers.get('etag')!;
    for (const ifNoneMatch of [etag, `W/${etag}`, `"something-else", ${etag}`, '*']) {
      const repeat = await list(stack, { ...member.headers, 'if-none-match': ifNoneMatch });
      expect({ ifNoneMatch, status: repeat.status, text: repeat.text }).toEqual({ ifNoneMatch, status: 304, text: '' });
      expect(repeat.headers.get('etag')).toBe(etag);
      expect(repeat.headers.get('cache-control')).toBe('private, no-cache');
    }
  });

  it('an If-None-Match that names another tag → 200 with the catalogue', async () => {
    const res = await list(stack, { ...member.headers, 'if-none-match': '"not-the-current-one"' });
    expect(res.status).toBe(200);
    expect(res.json.presets.length).toBe(MCP_PRESETS.length);
  });

  it('HEAD answers like GET, without a body', async () => {
    const etag = (await list(stack)).headers.get('etag')!;
    const head = await stack.request('HEAD', PATH, { headers: member.headers });
    expect(head.status).toBe(200);
    expect(head.headers.get('etag')).toBe(etag);
    const repeat = await stack.request('HEAD', PATH, { headers: { ...member.headers, 'if-none-match': etag } });
    expect(repeat.status).toBe(304);
  });

  it('replicas with the same settings agree on the ETag', async () => {
    const etag = (await list(stack)).headers.get('etag')!;
    const fromReplica = await list(replica, { ...member.headers, 'if-none-match': etag });
    expect(fromReplica.status).toBe(304);
    expect(fromReplica.headers.get('etag')).toBe(etag);
  });

  it('other pre-registered clients → another ETag: the old one gets 200 and the new catalogue', async () => {
    const etag = (await list(stack)).headers.get('etag')!;
    const res = await list(otherClients, { ...member.headers, 'if-none-match': etag });
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).not.toBe(etag);
    expect(res.json.presets.find((p: { presetId: string }) => p.presetId === 'github').requiresOAuthClient).toBe(true);
  });
});

describe('the OpenAPI document', () => {
  it('documents the route, either scheme, its answers, If-None-Match and ETag', async () => {
    const doc = (await stack.request('GET', '/openapi.json')).json;
    const op = doc.paths[PATH].get;
    expect(op.security).toEqual([{ bearerAuth: [] }, { denApiKey: [] }]);
    expect(op.description).toContain('An addition to the interface spec');
    // 403: a runner token, which opens only the run routes.
    expect(Object.keys(op.responses).sort()).toEqual(['200', '304', '400', '401', '403', '429', '503']);
    expect(op.parameters).toEqual([expect.objectContaining({ in: 'header', name: 'if-none-match', required: false })]);
    for (const status of ['200', '304']) expect(Object.keys(op.responses[status].headers).sort()).toEqual(['Cache-Control', 'ETag']);
    expect(op.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/McpPresetCatalog' });
    const preset = doc.components.schemas.McpPreset;
    expect(preset.required).toEqual(expect.arrayContaining(['presetId', 'url', 'domains']));
    expect(preset.properties.docsUrl).toBeDefined();
  });
});
