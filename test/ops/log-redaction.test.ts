/**
 * Secrets sent in requests never reach the log, even at debug level where request headers are
 * logged. Every route that takes a body is sent credential-shaped fields too.
 */
import { randomBytes } from 'node:crypto';
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';

const secret = (label: string) => `${label}-${randomBytes(16).toString('hex')}`;

describe('log redaction', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { LOG_LEVEL: 'debug' } });
  });
  afterAll(() => stack.stop());

  it('logs one line per request with id, route, status and latency', async () => {
    const res = await stack.request('GET', '/health', { headers: { 'x-request-id': 'req-123' } });
    expect(res.headers.get('x-request-id')).toBe('req-123');
    const line = stack.logs.find((l) => l.msg === 'request' && l.requestId === 'req-123');
    expect(line).toMatchObject({ route: '/health', status: 200, method: 'GET', latencyMs: expect.any(Number) });
  });

  it('never writes a credential header or a secret body field to the log', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const secrets = {
      bearer: secret('bearer'),
      apiKey: `den_${randomBytes(32).toString('base64url')}`,
      slackSignature: `v0=${randomBytes(32).toString('hex')}`,
      hubSignature: `sha256=${randomBytes(32).toString('hex')}`,
      bodyToken: secret('token'),
      signingSecret: secret('signing'),
      botToken: `xoxb-${randomBytes(12).toString('hex')}`,
    };
    const headers = {
      authorization: `Bearer ${secrets.bearer}`,
      'x-slack-signature': secrets.slackSignature,
      'x-hub-signature-256': secrets.hubSignature,
      'x-slack-request-timestamp': String(Math.floor(Date.now() / 1000)),
    };
    const body = { token: secrets.bodyToken, signingSecret: secrets.signingSecret, botToken: secrets.botToken, query: 'x' };

    // Every mounted POST route, with and without a valid key, and an invalid key.
    const document = (await stack.request('GET', '/openapi.json')).json as { paths: Record<string, Record<string, unknown>> };
    const posts = Object.entries(document.paths)
      .filter(([, operations]) => 'post' in operations)
      .map(([path]) => path.replace('{connectionId}', 'emc_01h2xcejqtf2nbrexx3vqjhp41').replace(/\{\w+\}/g, 'x'));
    expect(posts.length).toBeGreaterThan(0);
    for (const path of posts) {
      await stack.request('POST', path, { headers, body });
      await stack.request('POST', path, { headers: { ...headers, 'x-api-key': org.owner.apiKey }, body });
      await stack.request('POST', path, { headers: { ...headers, 'x-api-key': secrets.apiKey }, body });
    }
    await stack.request('GET', '/v1/me', { headers: { 'x-api-key': org.owner.apiKey } });

    const text = stack.logs.map((l) => JSON.stringify(l)).join('\n');
    // The headers were logged (so redaction did the work, not their absence)…
    expect(text).toContain('"x-slack-request-timestamp"');
    expect(text).toContain('[redacted]');
    // …and no secret value appears anywhere.
    for (const value of [...Object.values(secrets), org.owner.apiKey]) expect(text).not.toContain(value);
  });
});
