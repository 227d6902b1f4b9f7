import { signSlackRequest, verifySlackSignature, type HeaderBag } from '../../src/slack/signature';

// Slack's published example from its request-signing documentation.
const SECRET = '8f742231b10e8888abcd99yyyzzz85a5';
const TIMESTAMP = 1531420618;
const BODY =
  'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
const SIGNATURE = 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503';

const at = (seconds: number) => () => seconds * 1000;
const headers = (signature = SIGNATURE, timestamp: string | number = TIMESTAMP): HeaderBag => ({
  'x-slack-signature': signature,
  'x-slack-request-timestamp': String(timestamp),
});

function verify(
  overrides: {
    body?: string | Buffer;
    headers?: HeaderBag;
    now?: () => number;
    previous?: { secret: string; expiresAt: number };
    current?: string;
  } = {},
) {
  return verifySlackSignature({
    rawBody: overrides.body ?? Buffer.from(BODY),
    headers: overrides.headers ?? headers(),
    secrets: { current: overrides.current ?? SECRET, previous: overrides.previous },
    now: overrides.now ?? at(TIMESTAMP),
  });
}

describe('Slack signature verifier (pure)', () => {
  it('computes the published signature', () => {
    expect(signSlackRequest(SECRET, TIMESTAMP, BODY)).toBe(SIGNATURE);
    expect(signSlackRequest(SECRET, TIMESTAMP, Buffer.from(BODY))).toBe(SIGNATURE);
  });

  it('accepts the published vector, from a Buffer or a string', () => {
    expect(verify()).toEqual({ ok: true, secret: 'current' });
    expect(verify({ body: BODY })).toEqual({ ok: true, secret: 'current' });
  });

  it('rejects a changed body', () => {
    expect(verify({ body: BODY.replace('roadrunner', 'coyote') })).toEqual({ ok: false, reason: 'mismatch' });
    expect(verify({ body: `${BODY} ` })).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('rejects a changed timestamp (the signature binds it)', () => {
    expect(verify({ headers: headers(SIGNATURE, TIMESTAMP + 1) })).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('accepts exactly 300 s of skew in both directions and rejects 301 s', () => {
    expect(verify({ now: at(TIMESTAMP + 300) })).toEqual({ ok: true, secret: 'current' });
    expect(verify({ now: at(TIMESTAMP - 300) })).toEqual({ ok: true, secret: 'current' });
    expect(verify({ now: at(TIMESTAMP + 301) })).toEqual({ ok: false, reason: 'stale_timestamp' });
    expect(verify({ now: at(TIMESTAMP - 301) })).toEqual({ ok: false, reason: 'future_timestamp' });
  });

  it('rejects missing headers', () => {
    expect(verify({ headers: {} })).toEqual({ ok: false, reason: 'missing_headers' });
    expect(verify({ headers: { 'x-slack-signature': SIGNATURE } })).toEqual({ ok: false, reason: 'missing_headers' });
    expect(verify({ headers: { 'x-slack-request-timestamp': String(TIMESTAMP) } })).toEqual({ ok: false, reason: 'missing_headers' });
    expect(verify({ headers: headers('', TIMESTAMP) })).toEqual({ ok: false, reason: 'missing_headers' });
  });

  it.each([
    ['no version prefix', SIGNATURE.slice(3)],
    ['wrong version', `v1=${SIGNATURE.slice(3)}`],
    ['truncated', SIGNATURE.slice(0, -2)],
    ['too long', `${SIGNATURE}00`],
    ['not hex', `v0=${'z'.repeat(64)}`],
    ['two signatures', `${SIGNATURE},${SIGNATURE}`],
  ])('rejects a malformed signature: %s', (_name, signature) => {
    expect(verify({ headers: headers(signature) })).toEqual({ ok: false, reason: 'malformed_signature' });
  });

  it('rejects a repeated signature header', () => {
    expect(verify({ headers: { ...headers(), 'x-slack-signature': [SIGNATURE, SIGNATURE] } })).toEqual({
      ok: false,
      reason: 'malformed_signature',
    });
  });

  it.each([
    ['letters', 'abc'],
    ['negative', '-1531420618'],
    ['fraction', '1531420618.5'],
    ['huge', '9'.repeat(40)],
  ])('rejects a malformed timestamp: %s', (_name, timestamp) => {
    expect(verify({ headers: headers(SIGNATURE, timestamp) })).toEqual({ ok: false, reason: 'malformed_timestamp' });
  });

  it('rejects a correct-looking signature under another secret', () => {
    expect(verify({ current: 'another-secret' })).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('accepts the previous secret until it expires, and not after', () => {
    const previous = (expiresAt: number) => ({ current: 'the-new-secret', previous: { secret: SECRET, expiresAt } });
    expect(verify(previous(TIMESTAMP * 1000 + 1))).toEqual({ ok: true, secret: 'previous' });
    expect(verify(previous(TIMESTAMP * 1000))).toEqual({ ok: false, reason: 'mismatch' });
    expect(verify(previous(TIMESTAMP * 1000 - 60_000))).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('prefers the current secret when both would verify', () => {
    expect(verify({ previous: { secret: SECRET, expiresAt: Number.MAX_SAFE_INTEGER } })).toEqual({ ok: true, secret: 'current' });
  });

  it('reads header names case-insensitively', () => {
    expect(verify({ headers: { 'X-Slack-Signature': SIGNATURE, 'X-Slack-Request-Timestamp': String(TIMESTAMP) } })).toEqual({
      ok: true,
      secret: 'current',
    });
  });
});
