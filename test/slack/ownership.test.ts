/**
 * Whose an Events API delivery is (src/slack/ownership.ts): a shared channel's event names the
 * channel's owner as `team_id` and the installation in `authorizations`; `app_rate_limited`
 * carries none.
 */
import { isConnectionsEvent, parseAuthorizations, userTeamOf } from '../../src/slack/ownership';

const connection = { teamId: 'TOURS', apiAppId: 'AAPP', enterpriseId: null };
const auth = (teamId: string | null, extra: Partial<{ enterpriseId: string; isEnterpriseInstall: boolean }> = {}) => ({
  teamId,
  enterpriseId: extra.enterpriseId ?? null,
  isEnterpriseInstall: extra.isEnterpriseInstall ?? false,
});
const envelope = (teamId: string, authorizations?: ReturnType<typeof auth>[], type = 'event_callback', apiAppId = 'AAPP') => ({
  type,
  teamId,
  apiAppId,
  authorizations,
});

describe('isConnectionsEvent', () => {
  it("takes an event of the connection's own workspace", () => {
    expect(isConnectionsEvent(connection, envelope('TOURS'))).toBe(true);
    expect(isConnectionsEvent(connection, envelope('TOURS', [auth('TOURS')]))).toBe(true);
  });

  it("takes a shared channel's event: another workspace's team_id, the connection's team in authorizations", () => {
    expect(isConnectionsEvent(connection, envelope('TPARTNER', [auth('TOURS')]))).toBe(true);
    expect(isConnectionsEvent(connection, envelope('TPARTNER', [auth('TPARTNER')]))).toBe(false);
    expect(isConnectionsEvent(connection, envelope('TPARTNER'))).toBe(false);
  });

  it('takes an org-wide install’s event by its enterprise_id, only for an enterprise install', () => {
    const org = { ...connection, enterpriseId: 'EORG' };
    expect(isConnectionsEvent(org, envelope('TOTHER', [auth(null, { enterpriseId: 'EORG', isEnterpriseInstall: true })]))).toBe(true);
    expect(isConnectionsEvent(org, envelope('TOTHER', [auth('TOTHER', { enterpriseId: 'EORG' })]))).toBe(false);
    expect(isConnectionsEvent(connection, envelope('TOTHER', [auth(null, { enterpriseId: 'EORG', isEnterpriseInstall: true })]))).toBe(
      false,
    );
  });

  it('refuses another app whatever the team, and matches app_rate_limited on its top-level team_id alone', () => {
    expect(isConnectionsEvent(connection, envelope('TOURS', [auth('TOURS')], 'event_callback', 'AOTHER'))).toBe(false);
    expect(isConnectionsEvent(connection, { ...envelope('TOURS'), apiAppId: undefined })).toBe(false);
    expect(isConnectionsEvent(connection, envelope('TOURS', undefined, 'app_rate_limited'))).toBe(true);
    expect(isConnectionsEvent(connection, envelope('TPARTNER', [auth('TOURS')], 'app_rate_limited'))).toBe(false);
  });
});

describe('parsing', () => {
  it('reads authorizations as Slack sends them, skipping what is not an object', () => {
    expect(
      parseAuthorizations([
        { enterprise_id: null, team_id: 'T1', user_id: 'U1', is_bot: true, is_enterprise_install: false },
        'junk',
        { enterprise_id: 'E1', team_id: null, is_enterprise_install: true },
      ]),
    ).toEqual([auth('T1'), auth(null, { enterpriseId: 'E1', isEnterpriseInstall: true })]);
    expect(parseAuthorizations(undefined)).toBeUndefined();
  });

  it("names the asker's workspace: user_team, else team, else none", () => {
    expect(userTeamOf({ user_team: 'TA', team: 'TB' })).toBe('TA');
    expect(userTeamOf({ team: 'TB' })).toBe('TB');
    expect(userTeamOf({})).toBeNull();
  });
});
