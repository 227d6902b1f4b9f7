import { classifyEvent, type EligibilityContext } from '../../src/slack/eligibility';
import { parseEnvelope, parseSlashCommand } from '../../src/slack/envelope';

const on: EligibilityContext = { enabled: true, botUserId: 'UBOT', channels: null };
const mention = { type: 'app_mention', user: 'U1', channel: 'C1', ts: '1.000001', text: '<@UBOT> hi' };
const dm = { type: 'message', channel_type: 'im', user: 'U1', channel: 'D1', ts: '1.000002', text: 'hi' };

describe('classifyEvent', () => {
  it('routes app_mention and DMs as invocations, with the fields the workflow needs (the bot mention removed from the text)', () => {
    expect(classifyEvent(mention, on)).toEqual({
      route: 'invocation',
      invocation: {
        type: 'app_mention',
        user: 'U1',
        channel: 'C1',
        channelType: null,
        ts: '1.000001',
        threadTs: null,
        text: 'hi',
        userTeam: null,
      },
    });
    const inThread = classifyEvent({ ...dm, thread_ts: '0.5' }, on);
    expect(inThread).toMatchObject({ route: 'invocation', invocation: { type: 'message', channelType: 'im', threadTs: '0.5' } });
  });

  it("names the asker's own workspace: user_team, else team (a partner's in a shared channel)", () => {
    expect(classifyEvent({ ...mention, user_team: 'TPARTNER', team: 'TOTHER' }, on)).toMatchObject({
      invocation: { userTeam: 'TPARTNER' },
    });
    expect(classifyEvent({ ...mention, team: 'TPARTNER' }, on)).toMatchObject({ invocation: { userTeam: 'TPARTNER' } });
    expect(classifyEvent({ ...mention, user_team: '' }, on)).toMatchObject({ invocation: { userTeam: null } });
  });

  it('routes lifecycle events, even on a disabled connection', () => {
    expect(classifyEvent({ type: 'app_uninstalled' }, on)).toEqual({ route: 'lifecycle', type: 'app_uninstalled' });
    expect(classifyEvent({ type: 'tokens_revoked', tokens: { bot: ['UBOT'] } }, { ...on, enabled: false })).toEqual({
      route: 'lifecycle',
      type: 'tokens_revoked',
    });
  });

  it('routes a DM with a file (file_share), a thread_broadcast reply and a mention with files: the text, then the file names', () => {
    const files = [
      { id: 'F1', name: 'screenshot.png' },
      { id: 'F2', title: 'notes' },
    ];
    expect(classifyEvent({ ...dm, subtype: 'file_share', text: 'what is this?', files }, on)).toMatchObject({
      route: 'invocation',
      invocation: { text: 'what is this?\n\nAttached files: screenshot.png, notes' },
    });
    expect(classifyEvent({ ...dm, subtype: 'file_share', text: '', files: [files[0]] }, on)).toMatchObject({
      route: 'invocation',
      invocation: { text: 'Attached file: screenshot.png' },
    });
    expect(classifyEvent({ ...dm, subtype: 'thread_broadcast', thread_ts: '0.5' }, on)).toMatchObject({
      route: 'invocation',
      invocation: { text: 'hi', threadTs: '0.5' },
    });
    expect(classifyEvent({ ...mention, files }, on)).toMatchObject({ invocation: { text: 'hi\n\nAttached files: screenshot.png, notes' } });
  });

  it('ignores tokens_revoked that lists only user tokens: the service holds none', () => {
    expect(classifyEvent({ type: 'tokens_revoked', tokens: { oauth: ['U1', 'U2'] } }, on)).toEqual({
      route: 'ignore',
      reason: 'user_tokens_only',
    });
    expect(classifyEvent({ type: 'tokens_revoked', tokens: { oauth: ['U1'], bot: [] } }, on)).toEqual({
      route: 'ignore',
      reason: 'user_tokens_only',
    });
    expect(classifyEvent({ type: 'tokens_revoked', tokens: { oauth: ['U1'], bot: ['UBOT'] } }, on)).toMatchObject({ route: 'lifecycle' });
  });

  it.each<[string, Record<string, unknown>, EligibilityContext, string]>([
    ['disabled connection', mention, { ...on, enabled: false }, 'connection_disabled'],
    ['unsupported type', { type: 'reaction_added', user: 'U1' }, on, 'unsupported_type'],
    ['other subscribed type', { type: 'app_home_opened', user: 'U1' }, on, 'unsupported_type'],
    ['channel message (not im)', { ...dm, channel_type: 'channel', channel: 'C1' }, on, 'unsupported_type'],
    ['bot_id', { ...mention, bot_id: 'B1' }, on, 'bot_sender'],
    ['app_id', { ...dm, app_id: 'A1' }, on, 'bot_sender'],
    ['own bot user', { ...dm, user: 'UBOT' }, on, 'own_bot_user'],
    ['subtype', { ...dm, subtype: 'message_changed' }, on, 'unsupported_subtype'],
    ['blank text', { ...mention, text: '   ' }, on, 'incomplete_event'],
    ['no user', { ...mention, user: undefined }, on, 'incomplete_event'],
    ['no ts', { ...dm, ts: undefined }, on, 'incomplete_event'],
    ['channel off the allowlist', mention, { ...on, channels: ['C2'] }, 'channel_not_allowed'],
  ])('does not route: %s', (_name, event, connection, reason) => {
    expect(classifyEvent(event, connection)).toEqual({ route: 'ignore', reason });
  });

  it('lets DMs and allowlisted channels through an allowlist', () => {
    expect(classifyEvent(dm, { ...on, channels: ['C2'] }).route).toBe('invocation');
    expect(classifyEvent(mention, { ...on, channels: ['C2', 'C1'] }).route).toBe('invocation');
  });
});

describe('parseEnvelope', () => {
  const parse = (value: string) => parseEnvelope(Buffer.from(value));

  it('rejects non-JSON and non-envelopes with a path', () => {
    expect(parse('not json')).toEqual({ ok: false, details: [{ message: 'Body is not valid JSON.', path: [] }] });
    expect(parse('[1]')).toMatchObject({ ok: false, details: [{ path: [] }] });
    expect(parse('{"event_id":"Ev1"}')).toMatchObject({ ok: false, details: [{ path: ['type'] }] });
    expect(parse('{"type":"url_verification"}')).toMatchObject({ ok: false, details: [{ path: ['challenge'] }] });
  });

  it('reads url_verification and callbacks', () => {
    expect(parse('{"type":"url_verification","challenge":"abc","token":"x"}')).toEqual({
      ok: true,
      envelope: { kind: 'url_verification', challenge: 'abc' },
    });
    expect(parse('{"type":"event_callback","team_id":"T1","api_app_id":"A1","event_id":"Ev1","event":{"type":"x"}}')).toEqual({
      ok: true,
      envelope: { kind: 'callback', type: 'event_callback', teamId: 'T1', apiAppId: 'A1', eventId: 'Ev1', event: { type: 'x' } },
    });
    expect(parse('{"type":"app_rate_limited","team_id":"T1","api_app_id":"A1"}')).toMatchObject({
      ok: true,
      envelope: { eventId: undefined, event: undefined },
    });
  });
});

describe('parseSlashCommand', () => {
  it('needs team_id and user_id', () => {
    expect(parseSlashCommand(Buffer.from('command=%2Fden'))).toEqual({
      ok: false,
      details: [
        { message: 'Required form field.', path: ['team_id'] },
        { message: 'Required form field.', path: ['user_id'] },
      ],
    });
    expect(parseSlashCommand(Buffer.from('team_id=T1&user_id=U1&api_app_id=A1&command=%2Fden'))).toEqual({
      ok: true,
      command: { teamId: 'T1', userId: 'U1', apiAppId: 'A1', command: '/den', channelId: undefined, text: '', triggerId: undefined },
    });
    // The subcommand is the text, trimmed: `/den  status ` asks for status.
    expect(parseSlashCommand(Buffer.from('team_id=T1&user_id=U1&api_app_id=A1&command=%2Fden&text=+status+'))).toMatchObject({
      ok: true,
      command: { text: 'status' },
    });
  });
});
