/**
 * Failed authentications past the limit are answered 429 with Retry-After before any lookup,
 * over real HTTP on the real stack: API keys, signed Slack routes and the GitHub webhook.
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { typeid } from 'typeid-js';
import { createTestOrg } from '../harness/identity';
import { createTestSlackConnection, eventEnvelope, slackSignatureHeaders, type TestSlackConnection } from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';

const LIMITS = { AUTH_FAILURE_LIMIT: '5', AUTH_FAILURE_WINDOW: '60s' };

/** The value of one `den_auth_failures_total` series (0 when it was never counted). */
async function authFailures(stack: TestStack, surface: string, outcome: string): Promise<number> {
  const metric = await stack.services.metrics.authFailures.get();
  return metric.values.find((v) => v.labels.surface === surface && v.labels.outcome === outcome)?.value ?? 0;
}

async function signatureFailures(stack: TestStack): Promise<number> {
  const metric = await stack.services.metrics.signatureFailures.get();
  return metric.values.reduce((sum, v) => sum + v.value, 0);
}

/** A POST from a chosen loopback source address (127.0.0.0/8 is all loopback on Linux). */
function postFrom(
  stack: TestStack,
  localAddress: string,
  path: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  const url = new URL(stack.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path,
        localAddress,
        headers: { ...headers, 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const wellFormedBadKey = () => `den_${randomBytes(32).toString('base64url')}`;

describe('API keys', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: LIMITS });
  });
  afterAll(() => stack.stop());

  it('past the limit a bad key gets 429 with Retry-After, and a good key from the same address still succeeds', async () => {
    const org = await createTestOrg(stack.services.database.db);
    expect((await stack.request('GET', '/v1/me', { headers: org.owner.headers })).status).toBe(200);

    const repeated = wellFormedBadKey();
    for (const key of [repeated, repeated, wellFormedBadKey(), wellFormedBadKey(), wellFormedBadKey()]) {
      expect(await stack.request('GET', '/v1/me', { headers: { 'x-api-key': key } })).toMatchObject({
        status: 401,
        json: { error: 'unauthorized' },
      });
    }
    // The repeated unknown key was refused the second time without a query.
    expect(await authFailures(stack, 'credentials', 'rejected')).toBe(4);
    expect(await authFailures(stack, 'credentials', 'unknown_cached')).toBe(1);

    const limited = await stack.request('GET', '/v1/me', { headers: { 'x-api-key': wellFormedBadKey() } });
    expect(limited).toMatchObject({ status: 429, json: { error: 'rate_limited' } });
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await authFailures(stack, 'credentials', 'limited')).toBe(1);
    expect(await authFailures(stack, 'credentials', 'rejected')).toBe(4);

    expect(await stack.request('GET', '/v1/me', { headers: org.owner.headers })).toMatchObject({ status: 200 });
    const { token } = await org.session(org.owner.memberId);
    // A session this process never verified is not looked up from a limited address.
    expect((await stack.request('GET', '/v1/me', { headers: { authorization: `Bearer ${token}` } })).status).toBe(429);
  });
});

describe('Slack signed routes', () => {
  let stack: TestStack;
  let connection: TestSlackConnection;
  beforeAll(async () => {
    stack = await startTestStack({ env: LIMITS });
    const org = await createTestOrg(stack.services.database.db);
    connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId);
  });
  afterAll(() => stack.stop());

  const eventsPath = (id: string) => `/v1/integrations/slack/${id}/events`;
  const body = () => JSON.stringify(eventEnvelope(connection, { type: 'app_mention', user: 'U1', text: 'hi', channel: 'C1' }));
  const forged = (raw: string) => ({ 'content-type': 'application/json', ...slackSignatureHeaders('not-the-secret', raw) });

  it('an unknown connection id is looked up once, then refused from the negative cache', async () => {
    const unknown = typeid('emc').toString();
    const raw = body();
    for (let i = 0; i < 3; i++) expect((await postFrom(stack, '127.0.0.3', eventsPath(unknown), raw, forged(raw))).status).toBe(401);
    expect(await authFailures(stack, 'slack', 'rejected')).toBe(1);
    expect(await authFailures(stack, 'slack', 'unknown_cached')).toBe(2);
  });

  it('forged requests to one connection past the limit get 429 before the lookup and the signature check', async () => {
    const raw = body();
    // From two addresses, so the connection id reaches its limit before either address does.
    for (const from of ['127.0.0.4', '127.0.0.4', '127.0.0.4', '127.0.0.5', '127.0.0.5']) {
      expect((await postFrom(stack, from, eventsPath(connection.connectionId), raw, forged(raw))).status).toBe(401);
    }
    const checked = await signatureFailures(stack);
    expect(checked).toBe(5);

    const limited = await postFrom(stack, '127.0.0.6', eventsPath(connection.connectionId), raw, forged(raw));
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const command = await postFrom(stack, '127.0.0.6', `/v1/integrations/slack/${connection.connectionId}/commands`, 'text=x', {
      'content-type': 'application/x-www-form-urlencoded',
      ...slackSignatureHeaders('not-the-secret', 'text=x'),
    });
    expect(command.status).toBe(429);
    // No signature was checked (so no connection was read or decrypted) for the refused requests.
    expect(await signatureFailures(stack)).toBe(checked);
    expect(await authFailures(stack, 'slack', 'limited')).toBe(2);
  });

  it('an address past the limit gets 429 for any connection id, known or not', async () => {
    for (let i = 0; i < 5; i++) {
      const unknown = typeid('emc').toString();
      const raw = body();
      expect((await postFrom(stack, '127.0.0.7', eventsPath(unknown), raw, forged(raw))).status).toBe(401);
    }
    const raw = body();
    expect((await postFrom(stack, '127.0.0.7', eventsPath(typeid('emc').toString()), raw, forged(raw))).status).toBe(429);
  });
});

describe('GitHub webhook', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { ...LIMITS, GITHUB_WEBHOOK_SECRET: 'a-webhook-secret' } });
  });
  afterAll(() => stack.stop());

  it('bad signatures past the limit get 429 before the signature check', async () => {
    const raw = JSON.stringify({ zen: 'hi' });
    const headers = { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${'0'.repeat(64)}`, 'x-github-event': 'ping' };
    for (let i = 0; i < 5; i++)
      expect((await postFrom(stack, '127.0.0.8', '/v1/webhooks/connectors/github', raw, headers)).status).toBe(401);
    const limited = await postFrom(stack, '127.0.0.8', '/v1/webhooks/connectors/github', raw, headers);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await signatureFailures(stack)).toBe(5);
    expect(await authFailures(stack, 'github', 'limited')).toBe(1);
    // Another address is not affected.
    expect((await postFrom(stack, '127.0.0.9', '/v1/webhooks/connectors/github', raw, headers)).status).toBe(401);
  });
});
