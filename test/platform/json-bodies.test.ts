/**
 * What the route pipeline reads as a request body, over real HTTP: a JSON route parses the bytes
 * as they arrive (whatever Content-Type or Content-Encoding says, a leading byte-order mark
 * refused), hands any JSON value to its schema, and answers a body over its limit with a 413 in
 * plain text; a signed route verifies the exact bytes received, valid UTF-8 or not. These are the
 * rules a body-parsing library would have to keep (docs/architecture.md says which ones
 * `koa-bodyparser` does not).
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { signGithubPayload } from '../../src/github/signature';
import { HEARTBEAT_BODY_LIMIT_BYTES } from '../../src/runs/schemas';
import { rawRequest, type RawResponse } from '../fuzz/raw-http';
import { deliver, githubExample } from '../harness/github';
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const SECRET = `secret-${randomUUID()}`;
/** A JSON route whose body may be left out: `{waitSeconds?}`, at most HEARTBEAT_BODY_LIMIT_BYTES. */
const CLAIM_NEXT = '/v1/automation-runs/claim';
const NOT_JSON = { error: 'invalid_request', details: [{ message: 'Body is not valid JSON.', path: [] }] };

let stack: TestStack;
let apiKey: string;
beforeAll(async () => {
  stack = await startTestStack({ env: { GITHUB_WEBHOOK_SECRET: SECRET } });
  apiKey = (await createTestOrg(stack.services.database.db)).owner.apiKey;
});
afterAll(() => stack.stop());

/** POSTs `body` to the claim route with the owner's key and exactly the headers given (no Content-Type unless named). */
const claim = (body: Buffer | string, headers: [string, string][] = []): Promise<RawResponse> =>
  rawRequest({
    port: Number(new URL(stack.url).port),
    method: 'POST',
    path: CLAIM_NEXT,
    headers: [['x-api-key', apiKey], ...headers],
    body: Buffer.from(body),
  });
const json = (res: RawResponse): unknown => JSON.parse(res.body.toString('utf8'));
const header = (res: RawResponse, name: string) => new RegExp(`^${name}: (.*)$`, 'im').exec(res.headers)?.[1]?.trim();

describe('a JSON route parses the bytes as they arrive', () => {
  it.each(['(none)', 'text/plain', 'application/x-www-form-urlencoded'])(
    'whatever the Content-Type (%s): the body reaches the schema',
    async (type) => {
      const headers: [string, string][] = type === '(none)' ? [] : [['content-type', type]];
      expect((await claim('{"waitSeconds":0}', headers)).status).toBe(204);
      const invalid = await claim('{"waitSeconds":"soon"}', headers);
      expect(invalid.status).toBe(400);
      expect(json(invalid)).toMatchObject({ error: 'invalid_request', details: [{ path: ['waitSeconds'] }] });
    },
  );

  it('an empty body is no body: a schema that allows none accepts it', async () => {
    expect((await claim('', [['content-type', 'application/json']])).status).toBe(204);
  });

  it.each(['"soon"', '""', '0', 'true', 'null'])(
    'a bare JSON value (%s) is valid JSON: the schema refuses it, with path []',
    async (raw) => {
      const res = await claim(raw, [['content-type', 'application/json']]);
      expect(res.status).toBe(400);
      const body = json(res) as { error: string; details: { message: string; path: unknown[] }[] };
      expect(body.error).toBe('invalid_request');
      expect(body.details.map((d) => d.path)).toEqual([[]]);
      expect(body.details[0]!.message).not.toBe(NOT_JSON.details[0]!.message);
    },
  );

  it('a leading UTF-8 byte-order mark is not JSON: 400', async () => {
    const res = await claim(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{}')]), [['content-type', 'application/json']]);
    expect(res.status).toBe(400);
    expect(json(res)).toEqual(NOT_JSON);
  });

  it('Content-Encoding is not decoded: gzip bytes are not JSON, and plain JSON under any encoding is read as sent', async () => {
    const gzipped = await claim(gzipSync('{"waitSeconds":0}'), [['content-encoding', 'gzip']]);
    expect(gzipped.status).toBe(400);
    expect(json(gzipped)).toEqual(NOT_JSON);
    for (const encoding of ['gzip', 'br', 'x-unknown']) expect((await claim('{}', [['content-encoding', encoding]])).status).toBe(204);
  });

  it('text that is not JSON is a 400 InvalidRequestError', async () => {
    const res = await claim('{"waitSeconds":', [['content-type', 'application/json']]);
    expect(res.status).toBe(400);
    expect(json(res)).toEqual(NOT_JSON);
  });
});

describe("a JSON route's limit counts the bytes on the wire", () => {
  const limitText = `Payload too large: the limit is ${HEARTBEAT_BODY_LIMIT_BYTES} bytes.`;

  it('a body of exactly the limit is read; one byte more is a 413 in plain text, and the connection closes', async () => {
    const exact = '{"waitSeconds":0}'.padEnd(HEARTBEAT_BODY_LIMIT_BYTES, ' ');
    expect((await claim(exact, [['content-type', 'application/json']])).status).toBe(204);
    const over = await claim(`${exact} `, [['content-type', 'application/json']]);
    expect(over.status).toBe(413);
    expect(header(over, 'content-type')).toContain('text/plain');
    expect(header(over, 'connection')).toBe('close');
    expect(over.body.toString('utf8')).toBe(limitText);
  });

  it('a body sent without Content-Length is cut at the limit: 413, the rest drained so the answer is read', async () => {
    const answer = await new Promise<{ status: number; connection?: string; text: string }>((resolve, reject) => {
      const request = http.request(`${stack.url}${CLAIM_NEXT}`, { method: 'POST', headers: { 'x-api-key': apiKey } });
      request.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode!, connection: res.headers.connection, text: Buffer.concat(chunks).toString() }),
        );
      });
      request.on('error', reject);
      // Chunked, four times the limit, in pieces: the server answers once it has seen too much.
      for (let i = 0; i < 16; i++) request.write(' '.repeat(HEARTBEAT_BODY_LIMIT_BYTES / 4));
      request.end();
    });
    expect(answer).toEqual({ status: 413, connection: 'close', text: limitText });
  });

  it('an upload the client abandons is answered 400 (never a 5xx), whoever reads it', async () => {
    const requestId = `abandoned-${randomUUID()}`;
    const request = http.request(`${stack.url}${CLAIM_NEXT}`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'x-request-id': requestId, 'content-type': 'application/json', 'content-length': 1000 },
    });
    request.on('error', () => undefined);
    request.write('{"waitSeconds":');
    // Long enough for the server to authenticate the key and start reading the body.
    await new Promise((resolve) => setTimeout(resolve, 300));
    request.destroy();
    const line = await waitFor(async () => stack.logs.find((l) => l.requestId === requestId && l.msg === 'request'));
    expect(line).toMatchObject({ route: CLAIM_NEXT, status: 400 });
    expect(stack.logs.filter((l) => l.requestId === requestId && l.msg === 'unhandled error')).toEqual([]);
  });
});

describe('a signed route verifies the bytes it received', () => {
  // A ping with a string that is not valid UTF-8: decoding it to text and back would change its bytes.
  const raw = Buffer.concat([
    Buffer.from('{"note":"'),
    Buffer.from([0xff, 0xfe]),
    Buffer.from(`",${JSON.stringify(githubExample('ping')).slice(1)}`),
  ]);

  it('a signature over those exact bytes verifies; one over the bytes re-encoded from text does not', async () => {
    const exact = await deliver(stack, { event: 'ping', raw, secret: SECRET });
    expect(exact.status).toBe(200);
    expect(exact.json).toEqual({ ok: true, accepted: false, reason: 'ping' });
    const reencoded = Buffer.from(raw.toString('utf8'), 'utf8');
    expect(reencoded.equals(raw)).toBe(false);
    const asText = await deliver(stack, { event: 'ping', raw, secret: SECRET, signature: signGithubPayload(SECRET, reencoded) });
    expect(asText.status).toBe(401);
    expect(asText.json).toEqual({ ok: false, error: 'invalid signature' });
  });
});
