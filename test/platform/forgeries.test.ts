/**
 * Forged credentials and signatures never lock out valid traffic, over real HTTP on the real
 * stack: after many failures from one address (and to one Slack connection), correctly signed
 * Slack events for that connection and another organization's, a signed GitHub delivery, and an
 * API key or session this process never saw all get their normal answers. What a forgery costs is
 * bounded instead, and a known and an unknown Slack connection id take the same time to refuse.
 */
import http from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import { typeid } from 'typeid-js';
import { signGithubPayload } from '../../src/github/signature';
import { createApiKey } from '../../src/identity/store';
import { updateSlackConnection } from '../../src/slack/connections';
import { githubExample } from '../harness/github';
import { createTestOrg } from '../harness/identity';
import { createTestSlackConnection, eventEnvelope, slackSignatureHeaders, type TestSlackConnection } from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';

/** The value of one `den_auth_failures_total` series (0 when it was never counted). */
async function authFailures(stack: TestStack, surface: string, outcome: string): Promise<number> {
  const metric = await stack.services.metrics.authFailures.get();
  return metric.values.find((v) => v.labels.surface === surface && v.labels.outcome === outcome)?.value ?? 0;
}

/** A request from a chosen loopback source address (127.0.0.0/8 is all loopback on Linux). */
function requestFrom(
  stack: TestStack,
  localAddress: string,
  init: { method?: string; path: string; body?: string; headers: Record<string, string> },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const url = new URL(stack.url);
  const body = init.body ?? '';
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: init.method ?? 'POST',
        path: init.path,
        localAddress,
        headers: { ...init.headers, 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const wellFormedBadKey = () => `den_${randomBytes(32).toString('base64url')}`;
const eventsPath = (id: string) => `/v1/integrations/slack/${id}/events`;

describe('API keys and sessions', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack();
  });
  afterAll(() => stack.stop());

  it('after 25 unknown keys from one address, a key and a session this process never saw still work from it', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const repeated = wellFormedBadKey();
    for (const key of [repeated, repeated, ...Array.from({ length: 23 }, wellFormedBadKey)]) {
      const refused = await requestFrom(stack, '127.0.0.2', { method: 'GET', path: '/v1/me', headers: { 'x-api-key': key } });
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.body)).toEqual({ error: 'unauthorized' });
    }
    // The repeated unknown key was refused the second time without a query.
    expect(await authFailures(stack, 'credentials', 'rejected')).toBe(24);
    expect(await authFailures(stack, 'credentials', 'unknown_cached')).toBe(1);

    // Created after the failures, so this process has never verified either one.
    const { apiKey } = await createApiKey(stack.services.database.db, { memberId: org.owner.memberId, now: new Date() });
    const byKey = await requestFrom(stack, '127.0.0.2', { method: 'GET', path: '/v1/me', headers: { 'x-api-key': apiKey } });
    expect(byKey.status).toBe(200);
    const { token } = await org.session(org.owner.memberId);
    const bySession = await requestFrom(stack, '127.0.0.2', {
      method: 'GET',
      path: '/v1/me',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(bySession.status).toBe(200);
  });

  it('a flood of unknown keys is answered 401 each, and a valid first-seen key in the middle of it still works', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const { apiKey } = await createApiKey(stack.services.database.db, { memberId: org.owner.memberId, now: new Date() });
    const flood = Array.from({ length: 300 }, () => stack.request('GET', '/v1/me', { headers: { 'x-api-key': wellFormedBadKey() } }));
    const valid = stack.request('GET', '/v1/me', { headers: { 'x-api-key': apiKey } });
    const statuses = (await Promise.all(flood)).map((r) => r.status);
    expect(new Set(statuses)).toEqual(new Set([401]));
    expect((await valid).status).toBe(200);
  });

  it('a revoked key this process verified is refused at once', async () => {
    const org = await createTestOrg(stack.services.database.db);
    expect((await stack.request('GET', '/v1/me', { headers: org.owner.headers })).status).toBe(200);
    await stack.services.database.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date() })
      .where('member_id', '=', org.owner.memberId)
      .execute();
    expect((await stack.request('GET', '/v1/me', { headers: org.owner.headers })).status).toBe(401);
  });
});

describe('Slack signed routes', () => {
  let stack: TestStack;
  let a: TestSlackConnection;
  let b: TestSlackConnection;
  beforeAll(async () => {
    stack = await startTestStack();
    const db = stack.services.database.db;
    a = await createTestSlackConnection(db, stack.services.secretKey, (await createTestOrg(db)).organizationId);
    b = await createTestSlackConnection(db, stack.services.secretKey, (await createTestOrg(db)).organizationId);
  });
  afterAll(() => stack.stop());

  const envelope = (connection: TestSlackConnection) =>
    JSON.stringify(eventEnvelope(connection, { type: 'app_home_opened', user: 'U1', channel: 'D1' }));
  const forged = (raw: string) => ({ 'content-type': 'application/json', ...slackSignatureHeaders('not-the-secret', raw) });
  const signed = (connection: TestSlackConnection, raw: string) => ({
    'content-type': 'application/json',
    ...slackSignatureHeaders(connection.signingSecret, raw),
  });
  const post = (from: string, id: string, raw: string, headers: Record<string, string>) =>
    requestFrom(stack, from, { path: eventsPath(id), body: raw, headers });

  it('after 25 bad signatures to connection A from one address, signed events for A and B from it are answered', async () => {
    for (let i = 0; i < 25; i++) {
      const raw = envelope(a);
      expect((await post('127.0.0.3', a.connectionId, raw, forged(raw))).status).toBe(401);
    }
    for (const connection of [a, b]) {
      const raw = envelope(connection);
      const answer = await post('127.0.0.3', connection.connectionId, raw, signed(connection, raw));
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toEqual({ ok: true });
    }
    const challenge = JSON.stringify({ token: 'x', challenge: 'c-123', type: 'url_verification' });
    const verification = await post('127.0.0.3', b.connectionId, challenge, signed(b, challenge));
    expect(verification.status).toBe(200);
    expect(JSON.parse(verification.body)).toEqual({ challenge: 'c-123' });
  });

  it('after 25 bad signatures to connection B, a signed event for B from another address is answered', async () => {
    for (let i = 0; i < 25; i++) {
      const raw = envelope(b);
      expect((await post('127.0.0.4', b.connectionId, raw, forged(raw))).status).toBe(401);
    }
    const raw = envelope(b);
    expect((await post('127.0.0.5', b.connectionId, raw, signed(b, raw))).status).toBe(200);
    const command = 'command=%2Fden&text=help&team_id=' + b.teamId + '&api_app_id=' + b.appId + '&user_id=U1&channel_id=C1';
    const answer = await requestFrom(stack, '127.0.0.5', {
      path: `/v1/integrations/slack/${b.connectionId}/commands`,
      body: command,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...slackSignatureHeaders(b.signingSecret, command) },
    });
    expect(answer.status).toBe(200);
  });

  it('a rotated signing secret counts at once, though the old one is cached', async () => {
    const db = stack.services.database.db;
    const connection = await createTestSlackConnection(db, stack.services.secretKey, (await createTestOrg(db)).organizationId);
    const first = envelope(connection);
    expect((await post('127.0.0.7', connection.connectionId, first, signed(connection, first))).status).toBe(200);
    const rotated = { ...connection, signingSecret: randomUUID().replace(/-/g, '') };
    await updateSlackConnection(
      { db, secretKey: stack.services.secretKey },
      { connectionId: connection.connectionId, change: { signingSecret: rotated.signingSecret } },
    );
    const next = envelope(rotated);
    expect((await post('127.0.0.7', connection.connectionId, next, signed(rotated, next))).status).toBe(200);
    // The old secret no longer verifies, though it was cached a moment ago.
    const old = envelope(connection);
    expect((await post('127.0.0.7', connection.connectionId, old, signed(connection, old))).status).toBe(401);
  });

  it('a known and an unknown connection id take the same time to refuse (median difference under 0.5 ms over 1,000 tries)', async () => {
    const raw = envelope(a);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const url = new URL(stack.url);
    const time = (id: string) =>
      new Promise<number>((resolve, reject) => {
        const headers = { ...forged(raw), 'content-length': String(Buffer.byteLength(raw)) };
        const started = process.hrtime.bigint();
        const req = http.request({ host: url.hostname, port: url.port, method: 'POST', path: eventsPath(id), agent, headers }, (res) => {
          res.resume();
          res.on('end', () =>
            res.statusCode === 401
              ? resolve(Number(process.hrtime.bigint() - started) / 1e6)
              : reject(new Error(`status ${res.statusCode}`)),
          );
        });
        req.on('error', reject);
        req.end(raw);
      });
    const known: number[] = [];
    const unknown: number[] = [];
    // Interleaved, so both see the same machine load; a fresh unknown id every time.
    for (let i = 0; i < 1000; i++) {
      known.push(await time(a.connectionId));
      unknown.push(await time(typeid('emc').toString()));
    }
    agent.destroy();
    const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;
    const difference = Math.abs(median(known) - median(unknown));
    // Printed for the record: the medians and their difference on this machine.
    console.log(
      `refusal medians: known ${median(known).toFixed(3)} ms, unknown ${median(unknown).toFixed(3)} ms, difference ${difference.toFixed(3)} ms`,
    );
    expect(difference).toBeLessThan(0.5);
  }, 120_000);
});

describe('GitHub webhook', () => {
  let stack: TestStack;
  const secret = `secret-${randomUUID()}`;
  beforeAll(async () => {
    stack = await startTestStack({ env: { GITHUB_WEBHOOK_SECRET: secret } });
  });
  afterAll(() => stack.stop());

  it('after 25 bad signatures from one address, a correctly signed delivery from it is answered', async () => {
    const raw = JSON.stringify(githubExample('ping'));
    const headers = (signature: string) => ({
      'content-type': 'application/json',
      'x-hub-signature-256': signature,
      'x-github-event': 'ping',
      'x-github-delivery': randomUUID(),
    });
    for (let i = 0; i < 25; i++) {
      const refused = await requestFrom(stack, '127.0.0.8', {
        path: '/v1/webhooks/connectors/github',
        body: raw,
        headers: headers(`sha256=${'0'.repeat(64)}`),
      });
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.body)).toEqual({ ok: false, error: 'invalid signature' });
    }
    expect(await authFailures(stack, 'github', 'rejected')).toBe(25);
    const ping = await requestFrom(stack, '127.0.0.8', {
      path: '/v1/webhooks/connectors/github',
      body: raw,
      headers: headers(signGithubPayload(secret, raw)),
    });
    expect(ping.status).toBe(200);
    expect(JSON.parse(ping.body)).toMatchObject({ ok: true, accepted: false });
  });
});
