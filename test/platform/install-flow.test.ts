/**
 * The install flows' shared state and page (src/app/install-flow.ts), as pure functions: what a
 * state proves and when it is refused, and that the page escapes every value it shows. The
 * single use (the Postgres row) is exercised over HTTP by test/github/installations.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { escapeHtml, flowPage, FLOW_PAGE_POLICY, readFlowState, signFlowState, type FlowStateClaims } from '../../src/app/install-flow';

const key = randomBytes(32);
const claims = (extra: Partial<FlowStateClaims> = {}): FlowStateClaims => ({
  purpose: 'slack_install',
  organizationId: 'org_1',
  memberId: 'mem_1',
  subject: 'emc_01h2xcejqtf2nbrexx3vqjhp41',
  nonce: randomBytes(18).toString('base64url'),
  expiresAt: 1_000_000,
  ...extra,
});

describe('flow states', () => {
  it('carry their claims, subject included, for their purpose until they expire', () => {
    const issued = claims();
    const state = signFlowState(key, issued);
    expect(readFlowState(key, state, { purpose: 'slack_install', now: 999_999 })).toEqual({ ok: true, claims: issued });
    expect(readFlowState(key, state, { purpose: 'slack_install', now: 1_000_000 })).toEqual({ ok: false, reason: 'expired' });
    expect(readFlowState(key, state, { purpose: 'github_install', now: 0 })).toEqual({ ok: false, reason: 'wrong_purpose' });
    const bare = claims({ subject: null });
    expect(readFlowState(key, signFlowState(key, bare), { purpose: 'slack_install', now: 0 })).toEqual({ ok: true, claims: bare });
  });

  it('verify with the previous key during a rotation, and are signed with the current one', () => {
    const previous = randomBytes(32);
    const old = signFlowState(previous, claims());
    expect(readFlowState({ current: key, previous }, old, { purpose: 'slack_install', now: 0 }).ok).toBe(true);
    expect(readFlowState(key, old, { purpose: 'slack_install', now: 0 })).toEqual({ ok: false, reason: 'bad_signature' });
    const fresh = signFlowState({ current: key, previous }, claims());
    expect(readFlowState(key, fresh, { purpose: 'slack_install', now: 0 }).ok).toBe(true);
  });

  it('are refused when altered, malformed or not a string', () => {
    const state = signFlowState(key, claims());
    const [claimsPart, mac] = state.split('.') as [string, string];
    const raised = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(claimsPart, 'base64url').toString('utf8')), e: 9_999_999 }),
      'utf8',
    ).toString('base64url');
    expect(readFlowState(key, `${raised}.${mac}`, { purpose: 'slack_install', now: 0 })).toEqual({ ok: false, reason: 'bad_signature' });
    for (const bad of [undefined, 42, '', 'a.b', `${claimsPart}.${mac}x`, `${claimsPart}`, `${claimsPart}.${mac}.${mac}`]) {
      expect(readFlowState(key, bad, { purpose: 'slack_install', now: 0 })).toEqual({ ok: false, reason: 'malformed' });
    }
  });
});

describe('the flow page', () => {
  it('escapes the title, the message and every fact, and loads nothing', () => {
    const hostile = `<script>alert("x")</script><img src=x onerror='y'>&`;
    const page = flowPage({ status: 400, title: hostile, message: hostile, facts: [[hostile, hostile]] });
    const body = String(page.body);
    expect(body).not.toContain('<script');
    expect(body).not.toContain('<img');
    // In the title element and the heading, the message, the fact's label and its value.
    expect(body.split(escapeHtml(hostile)).length - 1).toBe(5);
    expect(escapeHtml(hostile)).toBe('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;');
    expect(page.status).toBe(400);
    expect(page.headers).toMatchObject({
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': FLOW_PAGE_POLICY,
      'cache-control': 'no-store',
      'referrer-policy': 'no-referrer',
    });
    expect(FLOW_PAGE_POLICY).toContain("default-src 'none'");
  });
});
