import { ping } from '../../workflows/ping';
import { randomUUID } from 'node:crypto';
import { pingWorkflowId } from '../../src/app/temporal/contract';
import { closedPort } from '../harness/ports';
import { startTestStack, type TestStack } from '../harness/stack';

describe('system routes on a real server', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ worker: true });
  });
  afterAll(() => stack.stop());

  it('GET /health answers without touching dependencies', async () => {
    const res = await stack.request('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('GET /ready is 200 when Postgres and Temporal both answer', async () => {
    const res = await stack.request('GET', '/ready');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true, checks: { postgres: 'ok', temporal: 'ok' } });
  });

  it('GET /openapi.json is OpenAPI 3.1 with both security schemes and the system paths', async () => {
    const res = await stack.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.json.openapi).toBe('3.1.0');
    expect(Object.keys(res.json.components.securitySchemes).sort()).toEqual(['bearerAuth', 'denApiKey']);
    expect(res.json.paths['/ready'].get.responses['503']).toBeDefined();
    expect(res.json.paths['/v1/me'].get.security).toEqual([{ bearerAuth: [] }, { denApiKey: [] }]);
  });

  it('GET /docs renders from local assets', async () => {
    const page = await stack.request('GET', '/docs');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.text).not.toMatch(/https?:\/\//);
    const asset = await stack.request('GET', '/docs/assets/swagger-ui-bundle.js');
    expect(asset.status).toBe(200);
    expect(asset.text.length).toBeGreaterThan(100_000);
    expect((await stack.request('GET', '/docs/assets/..%2Fpackage.json')).status).toBe(404);
  });

  it('every response says nosniff, errors included', async () => {
    for (const [method, path] of [
      ['GET', '/health'],
      ['GET', '/openapi.json'],
      ['GET', '/no-such-route'],
      ['GET', '/v1/me'],
      ['DELETE', '/health'],
    ] as const) {
      const res = await stack.request(method, path);
      expect([res.status, res.headers.get('x-content-type-options')]).toEqual([res.status, 'nosniff']);
    }
    expect((await stack.request('GET', '/no-such-route')).status).toBe(404);
  });

  it('/docs may not be framed, and its CSP allows exactly what the page loads', async () => {
    for (const path of ['/docs', '/docs/assets/init.js', '/docs/assets/nope.js']) {
      const res = await stack.request('GET', path);
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toMatch(/script-src[^;]*'unsafe-(inline|eval)'/);
    }
    const page = await stack.request('GET', '/docs');
    const csp = page.headers.get('content-security-policy')!;
    // The page's scripts are all same-origin files (no inline script); its stylesheet too.
    const scripts = [...page.text.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attributes, inline] of scripts) {
      expect(attributes).toMatch(/src="\/docs\/assets\/[\w.-]+"/);
      expect(inline!.trim()).toBe('');
      const src = /src="([^"]+)"/.exec(attributes!)![1]!;
      expect((await stack.request('GET', src)).status).toBe(200);
    }
    for (const [, href] of page.text.matchAll(/<link[^>]*href="([^"]+)"/g)) {
      expect(href).toMatch(/^\/docs\/assets\//);
      expect((await stack.request('GET', href!)).status).toBe(200);
    }
    // swagger-ui fetches the document from this origin and its stylesheet embeds data: images.
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toMatch(/img-src 'self' data:/);
    expect(csp).toMatch(/style-src 'self'/);
    // Other pages are JSON: no CSP or frame options needed there.
    expect((await stack.request('GET', '/health')).headers.get('x-frame-options')).toBeNull();
  });

  it('GET /metrics is Prometheus text with the request histogram', async () => {
    await stack.request('GET', '/health');
    const res = await stack.request('GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(res.text).toMatch(/den_http_request_duration_seconds_count\{route="\/health",method="GET",status="200"\} \d+/);
  });

  it('unknown routes get a JSON 404', async () => {
    const res = await stack.request('GET', '/v1/no-such-thing');
    expect(res.status).toBe(404);
    expect(res.json).toEqual({ error: 'not_found', message: 'No route for GET /v1/no-such-thing' });
  });

  it('a workflow round-trips through the worker', async () => {
    const id = pingWorkflowId(randomUUID());
    const result = await stack.services.temporal.client.workflow.execute(ping, {
      taskQueue: stack.services.temporal.taskQueue,
      workflowId: id,
      args: ['hello'],
    });
    expect(result).toEqual({ text: 'hello', workflowId: id });
  });
});

describe('/ready when Temporal is unreachable', () => {
  it('answers 503 and names Temporal', async () => {
    const stack = await startTestStack({ env: { TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}` } });
    try {
      const res = await stack.request('GET', '/ready');
      expect(res.status).toBe(503);
      expect(res.json.ok).toBe(false);
      expect(res.json.checks.postgres).toBe('ok');
      expect(res.json.checks.temporal).toMatch(/^unavailable/);
    } finally {
      await stack.stop();
    }
  });
});
