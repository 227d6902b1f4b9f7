import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { createLinkToken, verifyLinkToken } from '../../src/slack/link-token';
import { loadConfigWith } from '../../src/main/config';
import { QUOTA_WINDOW_MS, slackQuotaChecks } from '../../src/slack/quota';
import { windowStart } from '../../src/app/store/window-counter';
import { connectAccountText, connectLinkUrl, escapeMrkdwn, runReplyText, runStatusText } from '../../src/slack/texts';
import { RUN_STATUSES } from '../../src/runs/contract';
import { MENTION_FORMS, startFakeSlack, unsafeMrkdwn } from '../harness/slack';
import { callSlackApi, defuseMentions, parseRetryAfter } from '../../src/slack/web-api';
import { withoutBotMention } from '../../src/slack/eligibility';

describe('link tokens', () => {
  const key = randomBytes(32);
  const base = { connectionId: 'emc_01h2xcejqtf2nbrexx3vqjhp41', teamId: 'T1', slackUserId: 'U1', now: 1_000_000, ttlMs: 600_000 };

  it('round-trips its claims until it expires', () => {
    const { token, claims } = createLinkToken(key, base);
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(verifyLinkToken(key, token, base.now)).toEqual({ ok: true, claims });
    expect(verifyLinkToken(key, token, base.now + 599_999)).toEqual({ ok: true, claims });
    expect(verifyLinkToken(key, token, base.now + 600_000)).toEqual({ ok: false, reason: 'expired', claims });
    expect(claims).toMatchObject({ connectionId: base.connectionId, teamId: 'T1', slackUserId: 'U1', expiresAt: 1_600_000 });
  });

  it('gives every token its own nonce', () => {
    expect(createLinkToken(key, base).claims.nonce).not.toBe(createLinkToken(key, base).claims.nonce);
  });

  it('tells forged, tampered and foreign-key tokens (unknown) from malformed ones (invalid)', () => {
    const { token } = createLinkToken(key, base);
    const [claims, mac] = token.split('.') as [string, string];
    const otherUser = createLinkToken(key, { ...base, slackUserId: 'U2' }).token.split('.')[0]!;
    expect(verifyLinkToken(key, `${otherUser}.${mac}`, base.now)).toEqual({ ok: false, reason: 'unknown' });
    expect(verifyLinkToken(key, `${claims}.${mac.startsWith('A') ? 'B' : 'A'}${mac.slice(1)}`, base.now)).toEqual({
      ok: false,
      reason: 'unknown',
    });
    expect(verifyLinkToken(randomBytes(32), token, base.now)).toEqual({ ok: false, reason: 'unknown' });
    for (const junk of ['', 'abc', `${claims}.`, `.${mac}`, `${token}.x`, 'a'.repeat(5000)]) {
      expect(verifyLinkToken(key, junk, base.now)).toEqual({ ok: false, reason: 'invalid' });
    }
    // An expired forgery is unknown, not expired: expiry is only read from authentic claims.
    expect(verifyLinkToken(randomBytes(32), token, base.now + 10 * 600_000)).toEqual({ ok: false, reason: 'unknown' });
  });
});

describe('quota windows', () => {
  it('starts each fixed window on a multiple of its length', () => {
    expect(QUOTA_WINDOW_MS).toBe(60_000);
    expect(windowStart(0, QUOTA_WINDOW_MS)).toBe(0);
    expect(windowStart(59_999, QUOTA_WINDOW_MS)).toBe(0);
    expect(windowStart(60_000, QUOTA_WINDOW_MS)).toBe(60_000);
    expect(windowStart(119_999, QUOTA_WINDOW_MS)).toBe(60_000);
    // 2023-11-14T22:13:32.345Z lies in the minute that starts at 22:13:00.
    expect(windowStart(Date.parse('2023-11-14T22:13:32.345Z'), QUOTA_WINDOW_MS)).toBe(Date.parse('2023-11-14T22:13:00.000Z'));
    expect(windowStart(1_234, 1_000)).toBe(1_000);
    expect(windowStart(-1, QUOTA_WINDOW_MS)).toBe(-60_000);
  });

  it('checks the user first, then the workspace, with the configured limits', () => {
    const config = loadConfigWith({ SLACK_WORKSPACE_QUOTA_PER_MINUTE: '7', SLACK_USER_QUOTA_PER_MINUTE: '3' });
    expect(slackQuotaChecks(config.slack, 'T1', 'U1')).toEqual([
      { key: 'user:T1:U1', limit: 3 },
      { key: 'workspace:T1', limit: 7 },
    ]);
  });
});

describe('Slack texts', () => {
  it('offers the dashboard link as Slack mrkdwn and the command with the code; without a dashboard, the command alone', () => {
    const url = connectLinkUrl('https://dashboard.example/', 'abc.def');
    expect(url).toBe('https://dashboard.example/connect/slack?token=abc.def');
    const both = connectAccountText({ url, code: 'ABCDE-FGHJK', ttlMs: 600_000 });
    expect(both).toContain('<https://dashboard.example/connect/slack?token=abc.def|Connect your account>');
    expect(both).toContain('`npx den slack link ABCDE-FGHJK`');
    expect(both).toContain('10 minutes');
    const commandOnly = connectAccountText({ code: 'ABCDE-FGHJK', ttlMs: 60_000 });
    expect(commandOnly).toContain('`npx den slack link ABCDE-FGHJK`');
    expect(commandOnly).toContain('DEN_API_KEY');
    expect(commandOnly).toContain('1 minute.');
    expect(commandOnly).not.toMatch(/<[^>]*>/);
  });

  it('replies with the assistant text, or says why there is none', () => {
    expect(runReplyText({ status: 'succeeded', error: null, lastAssistantText: 'Done: 42' })).toBe('Done: 42');
    expect(runReplyText({ status: 'succeeded', error: null, lastAssistantText: null })).toBe('The run finished without a reply.');
    expect(runReplyText({ status: 'failed', error: 'lease_lost', lastAssistantText: null })).toBe('The run failed (lease_lost).');
    expect(runReplyText({ status: 'skipped', error: 'runner_unavailable', lastAssistantText: null })).toContain('No runtime picked up');
    expect(escapeMrkdwn('a<b>&c')).toBe('a&lt;b&gt;&amp;c');
  });

  it("escapes the runtime's text and the failure reason", () => {
    const forms = MENTION_FORMS.join(' ');
    const escaped = escapeMrkdwn(forms);
    expect(runReplyText({ status: 'succeeded', error: null, lastAssistantText: forms })).toBe(escaped);
    expect(runReplyText({ status: 'failed', error: forms, lastAssistantText: forms })).toBe(`The run failed (${escaped}).\n\n${escaped}`);
    expect(runReplyText({ status: 'cancelled', error: '<!here>', lastAssistantText: null })).toBe('The run was cancelled (&lt;!here&gt;).');
  });

  it('for any status, reason and text: nothing in the reply that Slack acts on', () => {
    const risky = fc.array(fc.oneof(fc.constantFrom(...MENTION_FORMS, '&', '<', '>'), fc.string({ maxLength: 6 })), { maxLength: 12 });
    fc.assert(
      fc.property(fc.constantFrom(...RUN_STATUSES), fc.option(risky), fc.option(risky), (status, error, text) => {
        const reply = runReplyText({ status, error: error?.join('') ?? null, lastAssistantText: text?.join('') ?? null });
        expect(unsafeMrkdwn(reply)).toEqual([]);
      }),
      { numRuns: 500 },
    );
  });

  it('/den status links a channel only by its Slack id; anything else shows as text', () => {
    const run = { runId: 'r1', status: 'running', startedAt: 0 };
    expect(runStatusText([{ ...run, channel: 'C0TESTCHAN' }], 0)).toContain(' in <#C0TESTCHAN>');
    const odd = runStatusText([{ ...run, channel: 'C1><!channel' }], 0);
    expect(odd).toContain(' in C1&gt;&lt;!channel');
    expect(odd).not.toMatch(/<[!@#]/);
  });

  it('reads Retry-After in seconds, bounded', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter('100000')).toBe(300_000);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(null)).toBeUndefined();
  });
});

describe('withoutBotMention (the run input of an app_mention)', () => {
  it("removes the bot's own mentions and keeps everyone else's", () => {
    expect(withoutBotMention('<@UBOT1> what is <@UALICE> doing?', 'UBOT1')).toBe('what is <@UALICE> doing?');
    expect(withoutBotMention('hey <@UBOT1|den>, summarize', 'UBOT1')).toBe('hey , summarize');
  });
  it('without a known bot user id, removes only the mention that opens the text', () => {
    expect(withoutBotMention('<@UOTHER> summarize <@UALICE>', null)).toBe('summarize <@UALICE>');
    expect(withoutBotMention('summarize <@UALICE>', null)).toBe('summarize <@UALICE>');
  });
});

describe('the last guard before a message leaves', () => {
  it('defuses every mention form and leaves links and escaped text alone', () => {
    expect(defuseMentions('<!channel> <!here|here> <!subteam^S1|@t> <@U1> <#C1|general> <https://a.example|a> &lt;@U2&gt;')).toBe(
      '&lt;!channel> &lt;!here|here> &lt;!subteam^S1|@t> &lt;@U1> &lt;#C1|general> <https://a.example|a> &lt;@U2&gt;',
    );
  });

  it('sends text Slack renders without a live mention, whatever an older release scheduled, and turns off parsing', async () => {
    const slack = await startFakeSlack();
    try {
      const raw = '<!channel> @here <@U123> <https://docs.example|docs>';
      const blocks = [{ type: 'section', text: { type: 'mrkdwn', text: raw, verbatim: true } }];
      const token = slack.issueToken({ token: 'xoxb-test', teamId: 'T1', appId: 'A1' });
      const result = await callSlackApi({ baseUrl: slack.url, token }, 'chat.update', {
        channel: 'C1',
        ts: '1.2',
        text: raw,
        blocks,
      });
      expect(result).toMatchObject({ ok: false, error: 'message_not_found' });
      const call = slack.calls.at(-1)!;
      expect(call.body.parse).toBe('none');
      for (const text of call.rendered) {
        expect(text).toBe('&lt;!channel> @here &lt;@U123> <https://docs.example|docs>');
        expect(unsafeMrkdwn(text).filter((problem) => problem.startsWith('live'))).toEqual([]);
      }
    } finally {
      await slack.close();
    }
  });
});
