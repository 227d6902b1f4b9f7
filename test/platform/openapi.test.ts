/**
 * The OpenAPI document states what the server does: bounds, required bodies,
 * the `type`/`kind` alternative and the statuses the pipeline itself answers, each checked here
 * against the real server's answer. `npm run conformance` checks the rest with schemathesis.
 */
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';

/* eslint-disable @typescript-eslint/no-explicit-any */
let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;
let doc: any;
beforeAll(async () => {
  stack = await startTestStack({ worker: true });
  org = await createTestOrg(stack.services.database.db);
  doc = (await stack.request('GET', '/openapi.json')).json;
});
afterAll(() => stack.stop());

const operations = () =>
  Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, operation]) => ({ label: `${method.toUpperCase()} ${path}`, operation })),
  );
const parameter = (path: string, method: string, name: string) =>
  doc.paths[path][method].parameters.find((p: any) => p.name === name).schema;

describe('bounds', () => {
  it('query integers carry the bounds the server enforces: limit=0 is outside the document and answered 400', async () => {
    expect(parameter('/v1/automation-runs', 'get', 'limit')).toMatchObject({ type: 'integer', minimum: 1, maximum: 500 });
    expect(parameter('/v1/automation-runs/{id}/events', 'get', 'attempt')).toMatchObject({ type: 'integer', minimum: 1 });
    expect(parameter('/v1/automation-runs/{id}/events', 'get', 'limit')).toMatchObject({ minimum: 1, maximum: 500 });
    expect((await stack.request('GET', '/v1/automation-runs?limit=0', { headers: org.owner.headers })).status).toBe(400);
    expect((await stack.request('GET', '/v1/automation-runs?limit=1', { headers: org.owner.headers })).status).toBe(200);
    expect((await stack.request('GET', '/v1/automation-runs?limit=500', { headers: org.owner.headers })).status).toBe(200);
    expect((await stack.request('GET', '/v1/automation-runs?limit=501', { headers: org.owner.headers })).status).toBe(400);
  });

  it('event integers stop at 2^53−1, as the server does', async () => {
    const fields = doc.components.schemas.AutomationRunEventInput.allOf[0].properties;
    for (const name of ['attempt', 'sequence', 'createdAt']) expect(fields[name].maximum).toBe(Number.MAX_SAFE_INTEGER);
    const res = await stack.request('POST', '/v1/automation-runs/bounds/events', {
      headers: org.owner.headers,
      raw: '{"attempt":1,"sequence":9007199254740992,"type":"user","payload":{},"createdAt":0}',
    });
    expect(res.status).toBe(400);
    expect(res.json.details.map((d: any) => d.path)).toEqual([['sequence']]);
  });

  it('the run id pattern refuses exactly what the server refuses', async () => {
    const pattern = new RegExp(parameter('/v1/automation-runs/{id}', 'get', 'id').pattern, 'u');
    // Refused: a C0 control and DEL. Accepted (no such run): a C1 control and CJK.
    for (const id of ['a\u001bb', 'a\u007fb', 'a\u009fb', '日本']) {
      const res = await stack.request('GET', `/v1/automation-runs/${encodeURIComponent(id)}`, { headers: org.owner.headers });
      expect({ id, status: res.status }).toEqual({ id, status: pattern.test(id) ? 404 : 400 });
    }
  });
});

describe('bodies', () => {
  it('a body is required exactly where the server refuses an empty one', async () => {
    const cases: [string, string, string][] = [
      ['/v1/automation-runs/{id}/heartbeat', '/v1/automation-runs/no-body/heartbeat', 'post'],
      ['/v1/mcp-connections/resolve', '/v1/mcp-connections/resolve', 'post'],
      ['/v1/automation-runs/{id}/claim', '/v1/automation-runs/no-body/claim', 'post'],
      ['/v1/automation-runs/claim', '/v1/automation-runs/claim', 'post'],
    ];
    for (const [template, path, method] of cases) {
      const required = doc.paths[template][method].requestBody.required;
      const res = await stack.request(method.toUpperCase(), path, { headers: org.owner.headers });
      // Refused bodies are 400; a claim without a body gets past validation (404: no such run, 204: nothing queued).
      expect({ template, required, status: res.status === 400 ? 400 : 'past validation' }).toEqual({
        template,
        required: res.status === 400,
        status: required ? 400 : 'past validation',
      });
    }
  });

  it('the event kind is `type`, `kind`, or both when equal: the document and the server agree', async () => {
    const kind = doc.components.schemas.AutomationRunEventInput.allOf[1];
    expect(kind.anyOf).toEqual(
      expect.arrayContaining([
        { required: ['type'], not: { required: ['kind'] } },
        { required: ['kind'], not: { required: ['type'] } },
        { required: ['type', 'kind'], properties: { type: { const: 'user' }, kind: { const: 'user' } } },
      ]),
    );
    const base = { attempt: 1, payload: {}, createdAt: 0 };
    const post = (sequence: number, extra: object) =>
      stack.request('POST', '/v1/automation-runs/kind-alternative/events', {
        headers: org.owner.headers,
        body: { ...base, sequence, ...extra },
      });
    expect((await post(1, {})).status).toBe(400);
    expect((await post(1, { type: 'user', kind: 'assistant' })).status).toBe(400);
    expect((await post(1, { kind: 'user' })).status).toBe(200);
    expect((await post(2, { type: 'user', kind: 'user' })).status).toBe(200);
    expect(kind.then.properties.payload.properties.status.enum).toEqual(['succeeded', 'failed', 'cancelled']);
    expect((await post(3, { type: 'terminal', payload: { status: 'done' } })).status).toBe(400);
  });
});

describe('statuses and security', () => {
  it('every operation lists the answers of the pipeline: 400 with parameters or a body, 413 with a body, 401 and 503 behind credentials', () => {
    const missing: string[] = [];
    for (const { label, operation } of operations()) {
      const has = (status: number) => operation.responses[String(status)] !== undefined || missing.push(`${label} ${status}`);
      if (operation.parameters?.length || operation.requestBody) has(400);
      if (operation.requestBody) has(413);
      if (operation.security.length > 0) [401, 503].forEach(has);
    }
    expect(missing).toEqual([]);
  });

  it('a session-only route declares bearerAuth alone and answers 401 without it', async () => {
    const operation = doc.paths['/v1/session/active-organization'].post;
    expect(operation.security).toEqual([{ bearerAuth: [] }]);
    expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['401', '403']));
    const res = await stack.request('POST', '/v1/session/active-organization', { body: { organizationId: org.organizationId } });
    expect(res).toMatchObject({ status: 401, json: { error: 'unauthorized' } });
  });
});
