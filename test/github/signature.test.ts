import { signGithubPayload, verifyGithubSignature, verifyWithFallback } from '../../src/github/signature';

// GitHub's documented test vector from its webhook-validation documentation.
const VECTOR = {
  secret: "It's a Secret to Everybody",
  payload: Buffer.from('Hello, World!'),
  signature: 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
};

describe('GitHub webhook signature', () => {
  it("signs GitHub's published vector", () => {
    expect(signGithubPayload(VECTOR.secret, VECTOR.payload)).toBe(VECTOR.signature);
  });

  it("verifies GitHub's published vector", () => {
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, VECTOR.signature)).toEqual({ ok: true, secret: 'current' });
  });

  it('rejects the payload with one byte changed', () => {
    const tampered = Buffer.from(VECTOR.payload);
    tampered[0] = tampered[0]! ^ 0x01;
    expect(verifyGithubSignature(VECTOR.secret, tampered, VECTOR.signature)).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('rejects a signature with one hex digit changed', () => {
    const last = VECTOR.signature.at(-1) === '0' ? '1' : '0';
    const changed = `${VECTOR.signature.slice(0, -1)}${last}`;
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, changed)).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('rejects a wrong prefix (sha1=, no prefix, SHA256=)', () => {
    const hex = VECTOR.signature.slice('sha256='.length);
    for (const header of [`sha1=${hex}`, hex, `SHA256=${hex}`, `sha256:${hex}`]) {
      expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, header)).toEqual({ ok: false, reason: 'malformed' });
    }
  });

  it('rejects uppercase hex (GitHub always sends lowercase)', () => {
    const upper = `sha256=${VECTOR.signature.slice('sha256='.length).toUpperCase()}`;
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, upper)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('rejects a truncated signature', () => {
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, VECTOR.signature.slice(0, -2))).toEqual({ ok: false, reason: 'malformed' });
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, 'sha256=')).toEqual({ ok: false, reason: 'malformed' });
  });

  it('rejects a signature with extra characters', () => {
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, `${VECTOR.signature}00`)).toEqual({ ok: false, reason: 'malformed' });
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, `${VECTOR.signature}, ${VECTOR.signature}`)).toEqual({
      ok: false,
      reason: 'malformed',
    });
  });

  it('treats an empty or absent header as missing', () => {
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, '')).toEqual({ ok: false, reason: 'missing' });
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, '   ')).toEqual({ ok: false, reason: 'missing' });
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, undefined)).toEqual({ ok: false, reason: 'missing' });
  });

  it('rejects a repeated header', () => {
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, [VECTOR.signature, VECTOR.signature])).toEqual({
      ok: false,
      reason: 'malformed',
    });
  });

  it('rejects a signature made with another secret', () => {
    const other = signGithubPayload('another secret', VECTOR.payload);
    expect(verifyGithubSignature(VECTOR.secret, VECTOR.payload, other)).toEqual({ ok: false, reason: 'mismatch' });
  });

  describe('verifyWithFallback (rotation)', () => {
    const current = 'new secret';
    const body = Buffer.from('{"zen":"Keep it logically awesome."}');

    it('accepts the current secret', () => {
      expect(verifyWithFallback({ current, previous: VECTOR.secret }, body, signGithubPayload(current, body))).toEqual({
        ok: true,
        secret: 'current',
      });
    });

    it('accepts the previous secret while it is configured', () => {
      expect(verifyWithFallback({ current, previous: VECTOR.secret }, VECTOR.payload, VECTOR.signature)).toEqual({
        ok: true,
        secret: 'previous',
      });
    });

    it('rejects the previous secret once it is removed', () => {
      expect(verifyWithFallback({ current }, VECTOR.payload, VECTOR.signature)).toEqual({ ok: false, reason: 'mismatch' });
      expect(verifyWithFallback({ current, previous: undefined }, VECTOR.payload, VECTOR.signature)).toEqual({
        ok: false,
        reason: 'mismatch',
      });
    });

    it('rejects a secret that is neither', () => {
      expect(verifyWithFallback({ current, previous: VECTOR.secret }, body, signGithubPayload('third', body))).toEqual({
        ok: false,
        reason: 'mismatch',
      });
    });
  });
});
