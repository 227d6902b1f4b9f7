/** The pure rules of onboarding: link codes, the manifest (against docs/slack.md and Slack's checks), the authorize URL. */
import fs from 'node:fs';
import path from 'node:path';
import { authorizeUrl } from '../../src/slack/install';
import { formatLinkCode, newLinkCode, normalizeLinkCode } from '../../src/slack/link-codes';
import { DEFAULT_SUGGESTED_PROMPTS } from '../../src/slack/assistant';
import { FOLLOW_UP_EVENTS, botDisplayName, manifestNeeds, slackAppManifest } from '../../src/slack/manifest';
import { manifestError } from '../harness/fake-slack-oauth';

describe('link codes', () => {
  it('are 10 characters of Crockford base32, shown as two groups of five', () => {
    const codes = Array.from({ length: 200 }, () => newLinkCode());
    for (const code of codes) expect(code).toMatch(/^[0-9A-HJKMNP-TV-Z]{10}$/);
    expect(new Set(codes).size).toBe(codes.length);
    expect(formatLinkCode('ABCDE12345')).toBe('ABCDE-12345');
  });

  it('are read as typed: any case, dashes and spaces dropped, O as 0 and I or L as 1', () => {
    expect(normalizeLinkCode('abcde-12345')).toBe('ABCDE12345');
    expect(normalizeLinkCode(' ABCDE 12345 ')).toBe('ABCDE12345');
    expect(normalizeLinkCode('OIL00-12345')).toBe('01100' + '12345');
    for (const bad of ['', 'ABCDE', 'ABCDE-1234', 'ABCDE-123456', 'ABCDU-12345', 'ABCDE_12345', 'x'.repeat(41)]) {
      expect({ bad, code: normalizeLinkCode(bad) }).toEqual({ bad, code: undefined });
    }
  });
});

describe('the app manifest', () => {
  const manifest = slackAppManifest({
    name: 'den (prod)',
    publicBaseUrl: 'https://den.example/',
    connectionId: 'emc_01h2xcejqtf2nbrexx3vqjhp41',
    conversation: { threadFollowUps: 'off', suggestedPrompts: [...DEFAULT_SUGGESTED_PROMPTS] },
  });
  const needs = manifestNeeds({ threadFollowUps: 'off' });

  it('is one Slack takes (the fake checks what Slack checks), every URL on the public URL', () => {
    expect(manifestError(manifest as Record<string, unknown>)).toBeUndefined();
    const urls = JSON.stringify(manifest).match(/https?:\/\/[^"]+/g)!;
    expect(urls.sort()).toEqual([
      'https://den.example/v1/integrations/slack/emc_01h2xcejqtf2nbrexx3vqjhp41/commands',
      'https://den.example/v1/integrations/slack/emc_01h2xcejqtf2nbrexx3vqjhp41/events',
      'https://den.example/v1/integrations/slack/emc_01h2xcejqtf2nbrexx3vqjhp41/interactions',
      'https://den.example/v1/integrations/slack/oauth/callback',
    ]);
    expect(manifest.features?.bot_user?.display_name).toBe('den-prod');
    expect(manifest.settings?.token_rotation_enabled).toBe(false);
    expect(manifest.features?.app_home).toMatchObject({ messages_tab_enabled: true, messages_tab_read_only_enabled: false });
  });

  it("turns on the agent experience with the connection's prompts, the Home tab, and the surface's scope and events", () => {
    const prompts = [
      { title: 'Ship it', message: 'Deploy main to staging.' },
      { title: 'Why red?', message: 'Why is the build red?' },
    ];
    const custom = slackAppManifest({
      name: 'den',
      publicBaseUrl: 'https://den.example',
      connectionId: 'emc_01h2xcejqtf2nbrexx3vqjhp41',
      conversation: { threadFollowUps: 'off', suggestedPrompts: prompts },
    });
    // Slack's *Agents & AI Apps* feature: `agent_view` (the current experience), with a description and the prompts.
    const agentView = custom.features?.agent_view;
    expect(agentView).toEqual({ agent_description: expect.any(String), suggested_prompts: prompts });
    expect(agentView!.agent_description!.length).toBeGreaterThan(0);
    expect(agentView!.agent_description!.length).toBeLessThanOrEqual(300);
    expect(manifest.features?.agent_view?.suggested_prompts).toEqual(DEFAULT_SUGGESTED_PROMPTS);
    expect(custom.features?.app_home?.home_tab_enabled).toBe(true);
    expect(custom.oauth_config?.scopes?.bot).toContain('assistant:write');
    expect(custom.settings?.event_subscriptions?.bot_events).toEqual(
      expect.arrayContaining(['assistant_thread_started', 'assistant_thread_context_changed', 'app_home_opened']),
    );
  });

  it('carries the scopes and events docs/slack.md lists for the app, no more and no fewer', () => {
    const doc = fs.readFileSync(path.resolve(__dirname, '../../docs/slack.md'), 'utf8');
    const listed = (label: string) => {
      const line = doc.split('\n').find((l) => l.startsWith(`**${label}`));
      // The code spans after the colon: the list itself, not the manifest field it names.
      const list = (line ?? '').split('):')[1] ?? '';
      return [...list.matchAll(/`([^`]+)`/g)].map((m) => m[1]!).sort();
    };
    expect(listed('Bot token scopes')).toEqual([...needs.scopes].sort());
    expect(listed('Bot events')).toEqual([...needs.events].sort());
    expect(listed('Bot events with follow-ups')).toEqual([...FOLLOW_UP_EVENTS].sort());
    expect(manifestNeeds({ threadFollowUps: 'asker' }).events.sort()).toEqual([...needs.events, ...FOLLOW_UP_EVENTS].sort());
  });

  it('names a bot user only with what Slack allows', () => {
    expect(botDisplayName('Den Bot!')).toBe('den-bot');
    expect(botDisplayName('***')).toBe('den');
    expect(botDisplayName('a.b_c-d')).toBe('a.b_c-d');
  });
});

it("Slack's authorize URL asks for the manifest's bot scopes, with the redirect URI and the state", () => {
  const url = new URL(
    authorizeUrl('https://slack.com/oauth/v2/authorize', { clientId: '1.2', redirectUri: 'https://den.example/cb', state: 'a.b' }),
  );
  expect(`${url.origin}${url.pathname}`).toBe('https://slack.com/oauth/v2/authorize');
  expect(Object.fromEntries(url.searchParams)).toEqual({
    client_id: '1.2',
    scope: manifestNeeds({ threadFollowUps: 'off' }).scopes.join(','),
    redirect_uri: 'https://den.example/cb',
    state: 'a.b',
  });
});
