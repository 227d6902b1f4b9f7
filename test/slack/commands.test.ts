/** Slack slash commands over real HTTP, on the Slack path and the `chatplatform` alias. */
import { verifyLinkToken } from '../../src/slack/link-token';
import { createTestOrg } from '../harness/identity';
import {
  createTestSlackConnection,
  linkTokenFrom,
  newSlackUserId,
  postSlashCommand,
  slackSignatureHeaders,
  type TestSlackConnection,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';

const DASHBOARD_URL = 'https://dashboard.example.test';
let stack: TestStack;
let organizationId: string;

beforeAll(async () => {
  // No worker, and the commands route never needs one: it answers without Temporal.
  stack = await startTestStack({ env: { DASHBOARD_URL } });
  organizationId = (await createTestOrg(stack.services.database.db)).organizationId;
});
afterAll(() => stack.stop());

describe.each(['slack', 'chatplatform'] as const)('POST /v1/integrations/%s/{connectionId}/commands', (provider) => {
  let connection: TestSlackConnection;
  const path = (id: string) => `/v1/integrations/${provider}/${id}/commands`;
  const send = (fields: Record<string, string>, to: TestSlackConnection = connection) => postSlashCommand(stack, to, fields, { provider });

  beforeAll(async () => {
    connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, organizationId);
  });

  it('200 ephemeral reply with a one-time connect link bound to the connection, team and user', async () => {
    const user = newSlackUserId();
    const before = Date.now();
    const res = await send({ user_id: user });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(res.json).sort()).toEqual(['response_type', 'text']);
    expect(res.json.response_type).toBe('ephemeral');
    expect(res.json.text).toMatch(
      new RegExp(`<${DASHBOARD_URL.replace(/\./g, '\\.')}/connect/slack\\?token=[A-Za-z0-9_.%-]+\\|Connect your account>`),
    );
    const verdict = verifyLinkToken(stack.services.secretKey, linkTokenFrom(res.json.text), Date.now());
    expect(verdict.ok).toBe(true);
    if (!verdict.ok) return;
    expect(verdict.claims).toMatchObject({ connectionId: connection.connectionId, teamId: connection.teamId, slackUserId: user });
    expect(verdict.claims.expiresAt).toBeGreaterThanOrEqual(before + 600_000);
    expect(verdict.claims.expiresAt).toBeLessThanOrEqual(Date.now() + 600_000);
  });

  it('403 {ok:false} for a command without api_app_id: it cannot prove which app it was meant for', async () => {
    const res = await send({ user_id: newSlackUserId(), api_app_id: '' });
    expect(res.status).toBe(403);
    expect(res.json).toEqual({ ok: false });
  });

  it("answers Slack's signed ssl_check=1 with 200 and an empty body, before any other command check", async () => {
    const raw = 'ssl_check=1&token=deprecated';
    const res = await stack.request('POST', path(connection.connectionId), {
      raw,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...slackSignatureHeaders(connection.signingSecret, raw) },
    });
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
    // Unsigned, it is an ordinary request with a bad signature.
    const unsigned = await stack.request('POST', path(connection.connectionId), {
      raw,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(unsigned.status).toBe(401);
  });

  it('400 InvalidRequestError for a bad connectionId', async () => {
    const raw = 'team_id=T1&user_id=U1';
    const res = await stack.request('POST', path('emc_nope'), {
      raw,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...slackSignatureHeaders('x', raw) },
    });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_request');
    expect(res.json.details[0].path).toEqual(['connectionId']);
  });

  it('400 InvalidRequestError for a signed form without user_id', async () => {
    const res = await send({ user_id: '' });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'invalid_request', details: [{ message: 'Required form field.', path: ['user_id'] }] });
  });

  it('401 {ok:false} for an unknown installation', async () => {
    const res = await send({ user_id: 'U1' }, { ...connection, connectionId: 'emc_01h2xcejqtf2nbrexx3vqjhp41' });
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ ok: false });
  });

  it('401 {ok:false} for a bad signature', async () => {
    const res = await send({ user_id: 'U1' }, { ...connection, signingSecret: 'wrong' });
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ ok: false });
    const future = await stack.request('POST', path(connection.connectionId), {
      raw: 'team_id=T&user_id=U',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...slackSignatureHeaders(connection.signingSecret, 'team_id=T&user_id=U', Math.floor(Date.now() / 1000) + 360),
      },
    });
    expect(future.status).toBe(401);
    expect(future.json).toEqual({ ok: false });
  });

  it('403 {ok:false} when team_id or api_app_id differs', async () => {
    const team = await send({ user_id: 'U1', team_id: 'TOTHER' });
    expect(team.status).toBe(403);
    expect(team.json).toEqual({ ok: false });
    const app = await send({ user_id: 'U1', api_app_id: 'AOTHER' });
    expect(app.status).toBe(403);
    expect(app.json).toEqual({ ok: false });
  });

  it('413 with a plain-text body over 100,000 bytes', async () => {
    const raw = `team_id=${connection.teamId}&user_id=U1&text=${'x'.repeat(100_001)}`;
    const res = await stack.request('POST', path(connection.connectionId), {
      raw,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...slackSignatureHeaders(connection.signingSecret, raw) },
    });
    expect(res.status).toBe(413);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toBe('Payload too large: the limit is 100000 bytes.');
  });

  it('on a disabled connection: an ephemeral notice and no link', async () => {
    const disabled = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, organizationId, {
      enabled: false,
    });
    const res = await send({ user_id: 'U1' }, disabled);
    expect(res.status).toBe(200);
    expect(res.json.response_type).toBe('ephemeral');
    expect(res.json.text).toContain('disabled');
    expect(res.json.text).not.toContain('Connect your account');
  });
});

describe('OpenAPI', () => {
  it('documents both paths of each Slack route, with no bearer/API-key scheme on the signed ones', async () => {
    const doc = (await stack.request('GET', '/openapi.json')).json;
    for (const provider of ['slack', 'chatplatform']) {
      for (const kind of ['events', 'commands']) {
        const operation = doc.paths[`/v1/integrations/${provider}/{connectionId}/${kind}`].post;
        expect(operation.security).toEqual([]);
        expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '413']));
        expect(operation.responses['413'].content['text/plain']).toBeDefined();
      }
    }
    expect(doc.paths['/v1/integrations/slack/{connectionId}/account-links'].post.security).toEqual([{ bearerAuth: [] }, { denApiKey: [] }]);
  });
});
