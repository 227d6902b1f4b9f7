/**
 * Every field rule of the automation-run routes, over real HTTP: each invalid input is a 400
 * InvalidRequestError whose details name exactly the offending paths; each valid edge is a 200
 * that reached the run.
 */
import { MAX_JSON_DEPTH } from '../../src/app/http/json-depth';
import { createTestOrg } from '../harness/identity';
import { event, newRunId, runResult, runsClient } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';

const MAX = Number.MAX_SAFE_INTEGER; // 9007199254740991
const base = () => ({ attempt: 1, sequence: 1, type: 'user', payload: { text: 'x' }, createdAt: 0 });

describe('automation-run input validation', () => {
  let stack: TestStack;
  let org: Awaited<ReturnType<typeof createTestOrg>>;
  let runs: ReturnType<typeof runsClient>;

  beforeAll(async () => {
    stack = await startTestStack({ worker: true });
    org = await createTestOrg(stack.services.database.db);
    runs = runsClient(stack, org.owner.headers);
  });
  afterAll(() => stack.stop());

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const expect400 = (res: { status: number; json: any }, paths: (string | number)[][]) => {
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_request');
    for (const detail of res.json.details) expect(typeof detail.message).toBe('string');
    const got = [...new Set(res.json.details.map((d: { path: unknown[] }) => JSON.stringify(d.path)))].sort();
    expect(got).toEqual(paths.map((p) => JSON.stringify(p)).sort());
  };

  const invalidEvents: [string, Record<string, unknown>, (string | number)[][]][] = [
    ['attempt missing', { attempt: undefined }, [['attempt']]],
    ['attempt 0 (lower bound is 1)', { attempt: 0 }, [['attempt']]],
    ['attempt negative', { attempt: -1 }, [['attempt']]],
    ['attempt not an integer', { attempt: 1.5 }, [['attempt']]],
    ['attempt a numeric string', { attempt: '1' }, [['attempt']]],
    ['attempt null', { attempt: null }, [['attempt']]],
    ['attempt 2^53 (above 2^53−1)', { attempt: MAX + 1 }, [['attempt']]],
    ['attempt 1e300', { attempt: 1e300 }, [['attempt']]],
    ['sequence missing', { sequence: undefined }, [['sequence']]],
    ['sequence 0', { sequence: 0 }, [['sequence']]],
    ['sequence not an integer', { sequence: 2.25 }, [['sequence']]],
    ['sequence 2^53', { sequence: MAX + 1 }, [['sequence']]],
    ['sequence a string', { sequence: 'one' }, [['sequence']]],
    ['createdAt missing', { createdAt: undefined }, [['createdAt']]],
    ['createdAt negative', { createdAt: -1 }, [['createdAt']]],
    ['createdAt not an integer', { createdAt: 0.5 }, [['createdAt']]],
    ['createdAt 2^53', { createdAt: MAX + 1 }, [['createdAt']]],
    ['createdAt an ISO string', { createdAt: '2024-01-01T00:00:00Z' }, [['createdAt']]],
    ['type and kind both missing', { type: undefined }, [['type']]],
    ['type not one of the kinds', { type: 'thought' }, [['type']]],
    ['type not a string', { type: 3 }, [['type']]],
    ['kind not one of the kinds', { type: undefined, kind: 'thought' }, [['kind']]],
    ['type and kind disagree', { type: 'user', kind: 'assistant' }, [['kind']]],
    ['payload missing', { payload: undefined }, [['payload']]],
    ['payload an array', { payload: [1, 2] }, [['payload']]],
    ['payload null', { payload: null }, [['payload']]],
    ['payload a string', { payload: 'text' }, [['payload']]],
    ['terminal with an unknown status', { type: 'terminal', payload: { status: 'done' } }, [['payload', 'status']]],
    ['terminal with a non-string error', { type: 'terminal', payload: { status: 'failed', error: 42 } }, [['payload', 'error']]],
    [
      'several problems at once',
      { attempt: 0, sequence: -5, createdAt: 'x', type: undefined },
      [['attempt'], ['sequence'], ['createdAt'], ['type']],
    ],
  ];

  it.each(invalidEvents)('event: %s → 400 with its path', async (_name, change, paths) => {
    const res = await runs.postEvent(newRunId(), { ...base(), ...change });
    expect400(res, paths);
  });

  it('event: bodies that are not a JSON object → 400', async () => {
    const id = newRunId();
    expect400(await runs.postEvent(id, [base()]), [[]]);
    const notJson = await stack.request('POST', `/v1/automation-runs/${id}/events`, {
      headers: { ...org.owner.headers, 'content-type': 'application/json' },
      raw: '{"attempt": 1,',
    });
    expect(notJson.status).toBe(400);
    expect(notJson.json).toEqual({ error: 'invalid_request', details: [{ message: 'Body is not valid JSON.', path: [] }] });
    const empty = await stack.request('POST', `/v1/automation-runs/${id}/events`, { headers: org.owner.headers });
    expect400(empty, [[]]);
  });

  it('event: a body over 256 KiB → 413 plain text', async () => {
    const res = await runs.postEvent(newRunId(), { ...base(), payload: { text: 'x'.repeat(300 * 1024) } });
    expect(res.status).toBe(413);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(res.text).toBe('Payload too large: the limit is 262144 bytes.');
  });

  it('path id: 1..160 characters, no control characters', async () => {
    expect400(await runs.postEvent('r'.repeat(161), base()), [['id']]);
    expect400(await runs.heartbeat('r'.repeat(161), 1), [['id']]);
    expect400(await runs.get('r'.repeat(161)), [['id']]);
    expect400(await runs.postEvent('bad\u0001id', base()), [['id']]);
    expect400(await runs.postEvent('nul\u0000id', base()), [['id']]);
    // An empty id does not match the route at all.
    expect((await stack.request('POST', '/v1/automation-runs//events', { headers: org.owner.headers, body: base() })).status).toBe(404);

    const longest = `${'r'.repeat(120)}-${newRunId()}`.slice(0, 160);
    expect(longest).toHaveLength(160);
    const ok = await runs.postEvent(longest, { ...base(), type: 'terminal', payload: {} });
    expect(ok.status).toBe(200);
    expect(ok.json).toEqual({ ok: true });
    expect((await runResult(stack, org.organizationId, longest)).status).toBe('succeeded');
    // Unicode and slashes are ordinary id characters (they are never split: the id is one path segment).
    const unicode = `ü/🚀/${newRunId()}`;
    expect((await runs.postEvent(unicode, { ...base(), type: 'terminal', payload: {} })).status).toBe(200);
    expect((await runResult(stack, org.organizationId, unicode)).id).toBe(unicode);
  });

  it('event: valid edges are accepted, `kind` is an alias of `type`, and unknown fields are ignored', async () => {
    const id = newRunId();
    const accepted = [
      { ...base(), sequence: 1, createdAt: 0, type: undefined, kind: 'assistant', payload: { text: 'via kind' } },
      { ...base(), sequence: 2, createdAt: MAX, type: 'usage', kind: 'usage', payload: { tokens: 3 } },
      { ...base(), sequence: 3, extra: 'ignored', nested: { deep: true }, payload: {} },
    ];
    for (const body of accepted) {
      const res = await runs.postEvent(id, body);
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ ok: true });
    }
    // Valid, so not a 400; further ahead than the run buffers, so refused before the ack.
    const farAhead = await runs.postEvent(id, { ...base(), sequence: MAX, type: 'warning' });
    expect(farAhead).toMatchObject({ status: 409, json: { error: 'sequence_out_of_window', expected: 4 } });
    await runs.postEvent(id, { ...event(1, 4, 'terminal', {}), attempt: 1 });
    const done = await runResult(stack, org.organizationId, id);
    expect(done.countsByType).toEqual({ assistant: 1, usage: 1, user: 1, terminal: 1 });
    expect(done.lastAssistantText).toBe('via kind');
    const log = await runs.events(id);
    expect(log.json.events.map((e: { type: string; createdAt: number }) => [e.type, e.createdAt])).toEqual([
      ['assistant', 0],
      ['usage', MAX],
      ['user', 0],
      ['terminal', 1_700_000_000_004],
    ]);
    expect(Object.keys(log.json.events[2])).not.toContain('extra');
  });

  it('event: the highest attempt and sequence (2^53−1) are valid input, and the run answers them', async () => {
    const res = await runs.postEvent(newRunId(), { ...base(), attempt: MAX, sequence: MAX });
    // Not a 400: the run's own limit refuses it, before the ack.
    expect(res).toMatchObject({ status: 409, json: { error: 'attempt_out_of_range' } });
    const sequence = await runs.postEvent(newRunId(), { ...base(), attempt: 1, sequence: MAX });
    expect(sequence).toMatchObject({ status: 409, json: { error: 'sequence_out_of_window', expected: 1 } });
  });

  it.each([
    ['attempt missing', {}],
    ['attempt 0', { attempt: 0 }],
    ['attempt not an integer', { attempt: 1.5 }],
    ['attempt a string', { attempt: '1' }],
    ['attempt 2^53', { attempt: MAX + 1 }],
  ])('heartbeat: %s → 400 with its path', async (_name, body) => {
    const res = await stack.request('POST', `/v1/automation-runs/${newRunId()}/heartbeat`, { headers: org.owner.headers, body });
    expect400(res, [['attempt']]);
  });

  it('heartbeat: valid with unknown fields ignored', async () => {
    const res = await stack.request('POST', `/v1/automation-runs/${newRunId()}/heartbeat`, {
      headers: org.owner.headers,
      body: { attempt: 1, runner: 'r-1' },
    });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true, leaseExpiresAt: expect.any(Number), cancelRequested: false, attempt: 1, leaseValid: true });
  });

  it.each([
    ['?limit=0', [['limit']]],
    ['?limit=501', [['limit']]],
    ['?limit=ten', [['limit']]],
    ['?after=-1', [['after']]],
    ['?after=1.5', [['after']]],
    ['?attempt=0', [['attempt']]],
    ['?attempt=1&attempt=2', [['attempt']]],
  ])('events query %s → 400', async (query, paths) => {
    expect400(await runs.events(newRunId(), query), paths);
  });

  it.each([
    ['?status=finished', [['status']]],
    ['?limit=0', [['limit']]],
    ['?limit=501', [['limit']]],
  ])('list query %s → 400', async (query, paths) => {
    expect400(await runs.list(query), paths);
  });

  it('every route needs credentials: none or a bad key → 401', async () => {
    const id = newRunId();
    for (const [method, path, body] of [
      ['POST', `/v1/automation-runs/${id}/events`, base()],
      ['POST', `/v1/automation-runs/${id}/heartbeat`, { attempt: 1 }],
      ['GET', `/v1/automation-runs/${id}`, undefined],
      ['GET', `/v1/automation-runs/${id}/events`, undefined],
      ['GET', '/v1/automation-runs', undefined],
    ] as const) {
      const none = await stack.request(method, path, { body });
      expect(none.status).toBe(401);
      expect(none.json).toEqual({ error: 'unauthorized' });
      const bad = await stack.request(method, path, { body, headers: { 'x-api-key': 'den_not-a-real-key' } });
      expect(bad.status).toBe(401);
      expect(bad.json).toEqual({ error: 'unauthorized' });
    }
  });

  it('documents the routes in OpenAPI with both security schemes', async () => {
    const doc = (await stack.request('GET', '/openapi.json')).json;
    const events = doc.paths['/v1/automation-runs/{id}/events'].post;
    expect(events.security).toEqual([{ bearerAuth: [] }, { denApiKey: [] }]);
    expect(Object.keys(events.responses).sort()).toEqual(['200', '400', '401', '404', '409', '413', '429', '503']);
    expect(doc.paths['/v1/automation-runs/{id}/heartbeat'].post).toBeDefined();
    expect(doc.paths['/v1/automation-runs'].get).toBeDefined();
    expect(doc.components.schemas.AutomationRunEventInput).toBeDefined();
  });
});

/** An object nested `levels` deep, itself included: nest(1) is {}, nest(2) is {a: {}}. */
const nest = (levels: number): Record<string, unknown> => {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
};

// A request body nests at most MAX_JSON_DEPTH levels (the body is level 1); deeper is a 400 with the path, never a 503.
describe('nesting depth at the edge', () => {
  let stack: TestStack;
  let headers: Record<string, string>;
  let runs: ReturnType<typeof runsClient>;

  beforeAll(async () => {
    stack = await startTestStack({ worker: true });
    headers = (await createTestOrg(stack.services.database.db)).owner.headers;
    runs = runsClient(stack, headers);
  });
  afterAll(() => stack.stop());

  const body = (payloadLevels: number) => ({ attempt: 1, sequence: 1, type: 'user', payload: nest(payloadLevels), createdAt: 0 });

  it(`a body ${MAX_JSON_DEPTH} levels deep is accepted`, async () => {
    const id = newRunId();
    const res = await runs.postEvent(id, body(MAX_JSON_DEPTH - 1));
    expect(res.status).toBe(200);
    expect((await runs.get(id)).json).toMatchObject({ id, eventCount: 1 });
  });

  it(`a body ${MAX_JSON_DEPTH + 1} levels deep is a 400 naming the path of the first value too deep`, async () => {
    const id = newRunId();
    const res = await runs.postEvent(id, body(MAX_JSON_DEPTH));
    expect(res.status).toBe(400);
    expect(res.json).toEqual({
      error: 'invalid_request',
      details: [{ message: expect.any(String), path: ['payload', ...Array<string>(MAX_JSON_DEPTH - 1).fill('a')] }],
    });
    expect((await runs.get(id)).status).toBe(404);
  });

  it('6,000 levels, under the size limit, is a 400 too: no Retry-After, no Temporal error counted', async () => {
    // Written by hand: JSON.stringify itself overflows the test's stack at this depth.
    const raw = `{"attempt":1,"sequence":1,"type":"user","createdAt":0,"payload":${'{"a":'.repeat(5999)}{}${'}'.repeat(5999)}}`;
    const res = await stack.request('POST', `/v1/automation-runs/${newRunId()}/events`, {
      headers: { ...headers, 'content-type': 'application/json' },
      raw,
    });
    expect(res.status).toBe(400);
    expect(res.headers.get('retry-after')).toBeNull();
    expect(res.json.error).toBe('invalid_request');
    expect(res.json.details[0].path).toHaveLength(MAX_JSON_DEPTH);
    const metrics = await stack.request('GET', '/metrics');
    expect(metrics.text).not.toMatch(/^den_temporal_client_errors_total\{[^}]*\} [1-9]/m);
  });

  it('arrays count as levels too', async () => {
    let value: unknown = [];
    for (let i = 1; i < MAX_JSON_DEPTH; i++) value = [value];
    const res = await runs.postEvent(newRunId(), { attempt: 1, sequence: 1, type: 'user', payload: { list: value }, createdAt: 0 });
    expect(res.status).toBe(400);
    expect(res.json.details[0].path).toEqual(['payload', 'list', ...Array<number>(MAX_JSON_DEPTH - 2).fill(0)]);
  });
});
