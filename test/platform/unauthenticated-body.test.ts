/**
 * Bounded memory before authentication, over real HTTP: the signed webhook routes refuse what
 * they can before reading a body, and the process holds at most UNAUTHENTICATED_BODY_BUDGET bytes
 * of bodies it has not authenticated, answering 503 `busy` unread past it, while small signed
 * deliveries keep being served.
 */
import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import { typeid } from 'typeid-js';
import { createApp } from '../../src/app/http/app';
import type { AppState } from '../../src/app/http/context';
import { defineRoute } from '../../src/app/http/route';
import { createLogger } from '../../src/app/log';
import { createMetrics } from '../../src/app/metrics';
import { deliver, githubExample } from '../harness/github';
import { startTestStack, type TestStack } from '../harness/stack';
import { startUpload } from '../harness/uploads';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
const MB25 = 25 * 1024 * 1024;
const BUDGET = 40 * 1024 * 1024;
const WELL_FORMED_SIGNATURE = `sha256=${'ab'.repeat(32)}`;

const githubHeaders = (length: number, signature = WELL_FORMED_SIGNATURE) => ({
  'content-type': 'application/json',
  'content-length': length,
  'x-github-event': 'push',
  'x-github-delivery': randomUUID(),
  'x-hub-signature-256': signature,
});

async function metric(stack: TestStack, line: RegExp): Promise<number> {
  const text = (await stack.request('GET', '/metrics')).text;
  const match = text.split('\n').find((l) => line.test(l));
  return match ? Number(match.split(' ').pop()) : 0;
}
const heldBytes = (stack: TestStack) => metric(stack, /^den_unauthenticated_body_bytes /);

describe('bounded memory before authentication', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { GITHUB_WEBHOOK_SECRET: SECRET, UNAUTHENTICATED_BODY_BUDGET: String(BUDGET) } });
  });
  afterAll(() => stack.stop());

  it('a declared body over 25 MB is a 413 before a byte of it is sent', async () => {
    const upload = startUpload(stack.url, '/v1/webhooks/connectors/github', githubHeaders(MB25 + 1));
    const answer = await upload.response;
    expect(answer.status).toBe(413);
    expect(answer.headers.connection).toBe('close');
    upload.request.destroy();
  });

  it.each([
    ['missing', undefined],
    ['malformed', 'sha256=nothex'],
  ])('a %s signature header is a 401 before the body is sent', async (_what, signature) => {
    const headers: Record<string, string | number> = githubHeaders(MB25, signature);
    if (signature === undefined) delete headers['x-hub-signature-256'];
    const upload = startUpload(stack.url, '/v1/webhooks/connectors/github', headers);
    const answer = await upload.response;
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body)).toEqual({ ok: false, error: 'invalid signature' });
    upload.request.destroy();
  });

  it('Slack signature headers that cannot verify (a stale timestamp) are a 401 before the body is sent', async () => {
    const headers = {
      'content-type': 'application/json',
      'content-length': 900_000,
      'x-slack-request-timestamp': String(Math.floor(Date.now() / 1000) - 3600),
      'x-slack-signature': `v0=${'ab'.repeat(32)}`,
    };
    const upload = startUpload(stack.url, `/v1/integrations/slack/${typeid('emc').toString()}/events`, headers);
    const answer = await upload.response;
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body)).toEqual({ ok: false });
    upload.request.destroy();
  });

  it('an unknown Slack connection is refused after its body, exactly like a bad signature', async () => {
    const headers = {
      'content-type': 'application/json',
      'content-length': 64 * 1024,
      'x-slack-request-timestamp': String(Math.floor(Date.now() / 1000)),
      'x-slack-signature': `v0=${'ab'.repeat(32)}`,
    };
    const upload = startUpload(stack.url, `/v1/integrations/slack/${typeid('emc').toString()}/events`, headers);
    let answered = false;
    void upload.response.then(() => (answered = true));
    upload.request.write(Buffer.alloc(32 * 1024, 0x20));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Half the body sent: no answer yet, since an answer now would tell the id is unknown.
    expect(answered).toBe(false);
    upload.request.end(Buffer.alloc(32 * 1024, 0x20));
    const answer = await upload.response;
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body)).toEqual({ ok: false });
    expect(answer.headers.connection).not.toBe('close');
  });

  it('a body sent without Content-Length may be at most 1 MiB', async () => {
    const headers: Record<string, string | number> = { ...githubHeaders(0), 'transfer-encoding': 'chunked' };
    delete headers['content-length'];
    const upload = startUpload(stack.url, '/v1/webhooks/connectors/github', headers);
    upload.request.write(Buffer.alloc(1024 * 1024 + 1, 0x20));
    upload.request.end();
    const answer = await upload.response;
    expect(answer.status).toBe(413);
    expect(answer.body).toContain('1048576');
  });

  it('past the budget a body is a 503 busy, unread; small signed deliveries still pass; the bytes come back', async () => {
    const refusedBefore = await metric(stack, /^den_unauthenticated_body_refusals_total\{route="\/v1\/webhooks\/connectors\/github"\}/);
    const first = startUpload(stack.url, '/v1/webhooks/connectors/github', githubHeaders(MB25));
    first.request.write(Buffer.alloc(1024 * 1024, 0x20));
    await waitFor(async () => (await heldBytes(stack)) === MB25, 5_000);

    // Two 25 MB bodies would pass the large share (3/4 of 40 MiB): the second is refused at once.
    const second = startUpload(stack.url, '/v1/webhooks/connectors/github', githubHeaders(MB25));
    const busy = await second.response;
    expect(busy.status).toBe(503);
    expect(busy.headers['retry-after']).toBe('1');
    expect(JSON.parse(busy.body)).toMatchObject({ error: 'busy' });
    second.request.destroy();
    const refusedAfter = await metric(stack, /^den_unauthenticated_body_refusals_total\{route="\/v1\/webhooks\/connectors\/github"\}/);
    expect(refusedAfter).toBe(refusedBefore + 1);

    // A small signed delivery still fits in the room large bodies may not take.
    const ping = await deliver(stack, { event: 'ping', payload: githubExample('ping'), secret: SECRET });
    expect(ping.status).toBe(200);
    expect(await heldBytes(stack)).toBe(MB25);

    // The first upload gives up: its bytes come back, and a large body fits again.
    first.request.destroy();
    await waitFor(async () => (await heldBytes(stack)) === 0, 5_000);
    const third = startUpload(stack.url, '/v1/webhooks/connectors/github', githubHeaders(MB25));
    third.request.write(Buffer.alloc(64 * 1024, 0x20));
    await waitFor(async () => (await heldBytes(stack)) === MB25, 5_000);
    third.request.destroy();
    await waitFor(async () => (await heldBytes(stack)) === 0, 5_000);
  });
});

describe('the budget at start-up', () => {
  const appWith = (budget: number, perAddress = budget): Koa<AppState> =>
    createApp({
      routes: [
        defineRoute({
          method: 'post',
          path: '/signed',
          summary: 'a signed route with large bodies',
          tags: ['test'],
          auth: 'signature',
          body: { kind: 'raw', limitBytes: MB25, contentType: 'application/json' },
          responses: { 200: { description: 'ok' } },
          handler: async () => ({ status: 200 }),
        }),
      ],
      authenticate: () => Promise.reject(new Error('no authenticated route here')),
      log: createLogger({ level: 'silent' }),
      metrics: createMetrics(),
      removedRoutes: [],
      unauthenticatedBodies: { budgetBytes: budget, perAddressBytes: perAddress, minBytesPerSecond: 64 * 1024, graceMs: 5000 },
      trustedProxies: [],
    });

  it('refuses to start when a signed route could never hold its largest body', () => {
    const tooSmall = /UNAUTHENTICATED_BODY_BUDGET or UNAUTHENTICATED_BODY_PER_ADDRESS: too small for \/signed/;
    expect(() => appWith(8 * 1024 * 1024)).toThrow(tooSmall);
    // One address's share is a bound on one body too.
    expect(() => appWith(BUDGET, 16 * 1024 * 1024)).toThrow(tooSmall);
    expect(() => appWith(BUDGET)).not.toThrow();
  });
});
