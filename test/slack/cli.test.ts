/**
 * `den slack connections …` through the real bin/den.js, against the suite's Postgres, and the
 * signing-secret rotation it performs, checked on the events route.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createTestOrg } from '../harness/identity';
import { WebClient } from '@slack/web-api';
import { createLinkToken } from '../../src/slack/link-token';
import { slackAppManifest } from '../../src/slack/manifest';
import { freshBotToken } from '../../src/slack/tokens';
import {
  createTestSlackConnection,
  linkTokenFrom,
  newSlackUserId,
  postSlashCommand,
  slackSignatureHeaders,
  startFakeSlack,
} from '../harness/slack';
import { denBin } from '../harness/den-bin';
import { startTestStack, type TestStack } from '../harness/stack';

const run = promisify(execFile);
const BIN = denBin();

/** Where the CLI's Slack Web API calls go (a fake's URL, for `delete`). */
let slackApiBaseUrl: string | undefined;

async function den(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    // Only what the CLI needs: the suite's Postgres and the same SECRET_KEY as the app under test.
    const env = {
      DATABASE_URL: stack.config.database.url,
      SECRET_KEY: stack.config.secretKey,
      DATA_DIR: stack.config.dataDir,
      TEMPORAL_ADDRESS: stack.config.temporal.address,
      NODE_ENV: 'test',
      ...(slackApiBaseUrl ? { SLACK_API_BASE_URL: slackApiBaseUrl } : {}),
    };
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

let stack: TestStack;
let organizationId: string;

beforeAll(async () => {
  stack = await startTestStack();
  organizationId = (await createTestOrg(stack.services.database.db)).organizationId;
});
afterAll(() => stack.stop());

async function challenge(connectionId: string, secret: string) {
  const raw = JSON.stringify({ type: 'url_verification', challenge: 'cli' });
  return stack.request('POST', `/v1/integrations/slack/${connectionId}/events`, {
    raw,
    headers: { 'content-type': 'application/json', ...slackSignatureHeaders(secret, raw) },
  });
}

describe('den slack connections', () => {
  let connectionId: string;

  it('create prints {connectionId} and stores secrets encrypted', async () => {
    const result = await den(
      'slack',
      'connections',
      'create',
      '--org',
      organizationId,
      '--team-id',
      'TCLI0001',
      '--app-id',
      'ACLI0001',
      '--signing-secret',
      'first-signing-secret',
      '--bot-token',
      'xoxb-cli-bot-token',
      '--bot-user-id',
      'UCLIBOT',
      '--channels',
      'C0001,C0002',
    );
    expect(result.stderr).not.toMatch(/den:/);
    expect(result.code).toBe(0);
    const printed = JSON.parse(result.stdout) as { connectionId: string };
    expect(Object.keys(printed)).toEqual(['connectionId']);
    expect(printed.connectionId).toMatch(/^emc_[0-7][0-9a-hjkmnp-tv-z]{25}$/);
    connectionId = printed.connectionId;

    const row = await stack.services.database.db
      .selectFrom('slack_connections')
      .selectAll()
      .where('id', '=', connectionId)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({
      organization_id: organizationId,
      team_id: 'TCLI0001',
      api_app_id: 'ACLI0001',
      bot_user_id: 'UCLIBOT',
      channels: ['C0001', 'C0002'],
      enabled: true,
    });
    expect(row.signing_secret).toMatch(/^v1\./);
    expect(row.signing_secret).not.toContain('first-signing-secret');
    expect(row.bot_token).not.toContain('xoxb-cli-bot-token');
    expect((await challenge(connectionId, 'first-signing-secret')).json).toEqual({ challenge: 'cli' });
  });

  it("list shows the organization's connections without secrets", async () => {
    const result = await den('slack', 'connections', 'list', '--org', organizationId);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toContain('first-signing-secret');
    expect(result.stdout).not.toContain('xoxb-cli-bot-token');
    const list = JSON.parse(result.stdout) as Record<string, unknown>[];
    expect(list).toEqual([
      expect.objectContaining({
        connectionId,
        organizationId,
        teamId: 'TCLI0001',
        appId: 'ACLI0001',
        botUserId: 'UCLIBOT',
        hasBotToken: true,
        channels: ['C0001', 'C0002'],
        enabled: true,
        previousSecretExpiresAt: null,
      }),
    ]);
  });

  it('update rotates the signing secret, keeping the previous one for the given hours', async () => {
    const result = await den(
      'slack',
      'connections',
      'update',
      connectionId,
      '--signing-secret',
      'second-signing-secret',
      '--previous-secret-valid-hours',
      '2',
    );
    expect(result.code).toBe(0);
    const view = JSON.parse(result.stdout) as { previousSecretExpiresAt: string };
    const expires = Date.parse(view.previousSecretExpiresAt);
    expect(expires).toBeGreaterThan(Date.now() + 2 * 3_600_000 - 60_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 2 * 3_600_000);
    expect((await challenge(connectionId, 'second-signing-secret')).status).toBe(200);
    expect((await challenge(connectionId, 'first-signing-secret')).status).toBe(200);

    // Without the flag, a rotated secret stops at once.
    expect((await den('slack', 'connections', 'update', connectionId, '--signing-secret', 'third-signing-secret')).code).toBe(0);
    expect((await challenge(connectionId, 'third-signing-secret')).status).toBe(200);
    const old = await challenge(connectionId, 'second-signing-secret');
    expect(old.status).toBe(401);
    expect(old.json).toEqual({ ok: false });
  });

  it('update --enabled and --channels', async () => {
    const disabled = await den('slack', 'connections', 'update', connectionId, '--enabled', 'false', '--channels', '');
    expect(disabled.code).toBe(0);
    expect(JSON.parse(disabled.stdout)).toMatchObject({ enabled: false, disabledReason: 'operator', channels: null });
    const enabled = await den('slack', 'connections', 'update', connectionId, '--enabled', 'true', '--channels', 'C0009');
    expect(JSON.parse(enabled.stdout)).toMatchObject({ enabled: true, disabledReason: null, channels: ['C0009'] });
  });

  it('create --disabled', async () => {
    const result = await den(
      'slack',
      'connections',
      'create',
      '--org',
      organizationId,
      '--team-id',
      'TCLI0002',
      '--app-id',
      'ACLI0002',
      '--signing-secret',
      's',
      '--disabled',
    );
    expect(result.code).toBe(0);
    const { connectionId: id } = JSON.parse(result.stdout) as { connectionId: string };
    const row = await stack.services.database.db
      .selectFrom('slack_connections')
      .select(['enabled', 'bot_token'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ enabled: false, bot_token: null });
  });

  it('fails clearly on bad input', async () => {
    const unknownOrg = await den(
      'slack',
      'connections',
      'create',
      '--org',
      'org_nope',
      '--team-id',
      'T1',
      '--app-id',
      'A1',
      '--signing-secret',
      's',
    );
    expect(unknownOrg.code).toBe(1);
    expect(unknownOrg.stderr).toContain('den: organization org_nope not found');
    const badTeam = await den(
      'slack',
      'connections',
      'create',
      '--org',
      organizationId,
      '--team-id',
      'not a team',
      '--app-id',
      'A1',
      '--signing-secret',
      's',
    );
    expect(badTeam.code).not.toBe(0);
    expect(badTeam.stderr).toContain('must be a Slack team id');
    const unknownId = await den('slack', 'connections', 'update', 'emc_01h2xcejqtf2nbrexx3vqjhp41', '--enabled', 'true');
    expect(unknownId.code).toBe(1);
    expect(unknownId.stderr).toContain('den: Slack connection emc_01h2xcejqtf2nbrexx3vqjhp41 not found');
    const hoursAlone = await den('slack', 'connections', 'update', connectionId, '--previous-secret-valid-hours', '1');
    expect(hoursAlone.code).toBe(1);
    expect(hoursAlone.stderr).toContain('only applies together with --signing-secret');
    const badEnabled = await den('slack', 'connections', 'update', connectionId, '--enabled', 'maybe');
    expect(badEnabled.code).not.toBe(0);
    expect(badEnabled.stderr).toContain('must be true or false');
  });
});

describe('den slack connections with token rotation on', () => {
  it('create and update take a rotating token with its refresh token, and the token is refreshed with the client credentials', async () => {
    const slack = await startFakeSlack({ tokenLifetimeMs: 60_000 });
    slackApiBaseUrl = slack.url;
    try {
      // An app whose owner switched rotation on in Slack; its operator installed it there and copied the tokens.
      const manifest = slackAppManifest({
        name: 'rotating',
        publicBaseUrl: stack.url,
        connectionId: 'emc_01h2xcejqtf2nbrexx3vqjhp41',
        conversation: { threadFollowUps: 'off', suggestedPrompts: [] },
      });
      const app = await slack.createApp({ ...manifest, settings: { ...manifest.settings, token_rotation_enabled: true } });
      const teamId = slack.addWorkspace('rotating');
      const redirectUri = manifest.oauth_config!.redirect_urls![0]!;
      const code = slack.issueCode({ clientId: app.clientId, redirectUri, teamId, scopes: manifest.oauth_config!.scopes!.bot! });
      const issued = await new WebClient('', { slackApiUrl: `${slack.url}/` }).oauth.v2.access({
        client_id: app.clientId,
        client_secret: app.clientSecret,
        code,
        redirect_uri: redirectUri,
      });
      const rotation = ['--refresh-token', issued.refresh_token!, '--token-expires-in', String(issued.expires_in)];
      const base = ['slack', 'connections', 'create', '--org', organizationId, '--team-id', teamId, '--app-id', app.appId];
      const secrets = ['--signing-secret', app.signingSecret, '--bot-token', issued.access_token!];

      const withoutClient = await den(...base, ...secrets, ...rotation);
      expect(withoutClient.code).toBe(1);
      expect(withoutClient.stderr).toContain('needs --client-id and --client-secret');
      const withoutLifetime = await den(...base, ...secrets, '--refresh-token', issued.refresh_token!);
      expect(withoutLifetime.code).toBe(1);
      expect(withoutLifetime.stderr).toContain('--refresh-token and --token-expires-in go together');

      const created = await den(...base, ...secrets, ...rotation, '--client-id', app.clientId, '--client-secret', app.clientSecret);
      expect(created.stderr).not.toMatch(/den:/);
      const { connectionId: id } = JSON.parse(created.stdout) as { connectionId: string };
      const row = () =>
        stack.services.database.db.selectFrom('slack_connections').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      const stored = await row();
      expect(stored.refresh_token).toMatch(/^v1\./);
      expect(stored.refresh_token).not.toContain(issued.refresh_token!);
      expect(stored.client_secret).not.toContain(app.clientSecret);
      expect(stored.token_expires_at!.getTime() - stored.token_issued_at!.getTime()).toBe(issued.expires_in! * 1000);
      const listed = JSON.parse((await den('slack', 'connections', 'list', '--org', organizationId)).stdout) as Record<string, unknown>[];
      expect(listed.find((c) => c.connectionId === id)).toMatchObject({ tokenRotation: true, hasBotToken: true });
      expect(JSON.stringify(listed)).not.toContain(issued.refresh_token!);

      // Due (a test's clock ten seconds before expiry): refreshed once, with the credentials the operator gave.
      const deps = { db: stack.services.database.db, secretKey: stack.services.secretKey, apiBaseUrl: slack.url };
      const fresh = await freshBotToken({ ...deps, now: () => stored.token_expires_at!.getTime() - 5_000 }, id);
      expect(fresh).toMatchObject({ ok: true, refreshed: true });
      expect((fresh as { token: string }).token).not.toBe(issued.access_token);
      expect((await row()).token_expires_at!.getTime()).toBeGreaterThan(stored.token_expires_at!.getTime());

      // A plain token replaces the rotating one: rotation off, nothing left to refresh.
      const plain = await den('slack', 'connections', 'update', id, '--bot-token', 'xoxb-plain-token');
      expect(JSON.parse(plain.stdout)).toMatchObject({ tokenRotation: false, tokenExpiresAt: null });
      expect(await row()).toMatchObject({ refresh_token: null, token_expires_at: null });
      // …and update takes a rotating one again.
      const again = await den('slack', 'connections', 'update', id, '--bot-token', 'xoxe.xoxb-again', ...rotation);
      expect(JSON.parse(again.stdout)).toMatchObject({ tokenRotation: true });
      const alone = await den('slack', 'connections', 'update', id, '--refresh-token', 'xoxe-1-alone', '--token-expires-in', '60');
      expect(alone.code).toBe(1);
      expect(alone.stderr).toContain('with the --bot-token they belong to');
    } finally {
      slackApiBaseUrl = undefined;
      await slack.close();
    }
  });
});

describe('den slack connections delete', () => {
  it('revokes the bot token at Slack and removes the connection, as the API does; its next request is refused as unknown', async () => {
    const slack = await startFakeSlack();
    slackApiBaseUrl = slack.url;
    try {
      const org = await createTestOrg(stack.services.database.db);
      const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId, {
        slack,
      });
      expect((await challenge(connection.connectionId, connection.signingSecret)).status).toBe(200);
      const other = await createTestOrg(stack.services.database.db);
      const wrongOrg = await den('slack', 'connections', 'delete', connection.connectionId, '--org', other.organizationId);
      expect(wrongOrg.code).toBe(1);
      expect(wrongOrg.stderr).toContain('not found');

      const deleted = await den('slack', 'connections', 'delete', connection.connectionId, '--org', org.organizationId);
      expect(deleted.code).toBe(0);
      expect(JSON.parse(deleted.stdout)).toEqual({ connectionId: connection.connectionId, token: 'revoked', links: 0, waiting: 0 });
      const revoke = slack.calls.find((c) => c.method === 'auth.revoke');
      expect(revoke?.authorization).toBe(`Bearer xoxb-test-${connection.teamId.slice(1)}`);
      expect(slack.tokens.get(`xoxb-test-${connection.teamId.slice(1)}`)?.revoked).toBe(true);
      expect((await challenge(connection.connectionId, connection.signingSecret)).status).toBe(401);
    } finally {
      slackApiBaseUrl = undefined;
      await slack.close();
    }
  });
});

describe('den slack links complete (deployments without a dashboard)', () => {
  /** A real slash command's link token, and the connection it belongs to. */
  async function linkToken(org: Awaited<ReturnType<typeof createTestOrg>>) {
    const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId);
    const slackUserId = newSlackUserId();
    const command = await postSlashCommand(stack, connection, { user_id: slackUserId });
    return { connection, slackUserId, token: linkTokenFrom(command.json.text) };
  }

  it('completes a link exactly as the account-links route does, with the same refusals', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const member = await org.addMember('member');
    const { connection, slackUserId, token } = await linkToken(org);

    const done = await den('slack', 'links', 'complete', '--token', token, '--member', member.memberId);
    expect(done.code).toBe(0);
    expect(JSON.parse(done.stdout)).toEqual({ connectionId: connection.connectionId, slackUserId, memberId: member.memberId, resumed: 0 });
    const row = await stack.services.database.db
      .selectFrom('slack_account_links')
      .selectAll()
      .where('connection_id', '=', connection.connectionId)
      .where('slack_user_id', '=', slackUserId)
      .executeTakeFirst();
    expect(row).toMatchObject({ member_id: member.memberId, organization_id: org.organizationId });

    const again = await den('slack', 'links', 'complete', '--token', token, '--member', member.memberId);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('link_used (the API would answer 409)');

    const forged = await den('slack', 'links', 'complete', '--token', `${token.slice(0, -4)}AAAA`, '--member', member.memberId);
    expect(forged.code).toBe(1);
    expect(forged.stderr).toContain('link_not_found (the API would answer 404)');

    const stranger = await createTestOrg(stack.services.database.db);
    const fresh = await linkToken(org);
    const wrongMember = await den('slack', 'links', 'complete', '--token', fresh.token, '--member', stranger.owner.memberId);
    expect(wrongMember.code).toBe(1);
    expect(wrongMember.stderr).toContain('other_organization (the API would answer 404)');
  });

  it('refuses an expired link token', async () => {
    const org = await createTestOrg(stack.services.database.db);
    const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId);
    const { token } = createLinkToken(stack.services.secretKey, {
      connectionId: connection.connectionId,
      teamId: connection.teamId,
      slackUserId: newSlackUserId(),
      now: Date.now() - 3_600_000,
      ttlMs: 600_000,
    });
    const expired = await den('slack', 'links', 'complete', '--token', token, '--member', org.owner.memberId);
    expect(expired.code).toBe(1);
    expect(expired.stderr).toContain('link_expired (the API would answer 410)');
  });
});
