/**
 * SECRET_KEY rotation: stored Slack secrets sealed with the old key keep working
 * while SECRET_KEY_PREVIOUS names it; `den secrets rotate` re-seals them with the new key; a
 * secret no configured key opens is a 503 naming the secret key, never a 500.
 */
import { randomBytes } from 'node:crypto';
import { createLinkToken, verifyLinkToken } from '../../src/slack/link-token';
import { resealSlackSecrets } from '../../src/slack/connections';
import { createTestOrg } from '../harness/identity';
import { spawnDen } from '../harness/process';
import { createTestSlackConnection, slackSignatureHeaders, type TestSlackConnection } from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';

const oldKey = randomBytes(32);
const newKey = randomBytes(32);
const stacks: TestStack[] = [];
const stackWith = async (env: Record<string, string>) => {
  const stack = await startTestStack({ env });
  stacks.push(stack);
  return stack;
};
afterAll(async () => {
  for (const stack of stacks) await stack.stop();
});

const challenge = (stack: TestStack, connection: TestSlackConnection) => {
  const raw = JSON.stringify({ type: 'url_verification', challenge: 'rotate' });
  return stack.request('POST', `/v1/integrations/slack/${connection.connectionId}/events`, {
    raw,
    headers: { 'content-type': 'application/json', ...slackSignatureHeaders(connection.signingSecret, raw) },
  });
};

it('opens with the previous key during a rotation, re-seals with the new one, and answers 503 (not 500) when no key opens', async () => {
  const before = await stackWith({ SECRET_KEY: oldKey.toString('hex') });
  const org = await createTestOrg(before.services.database.db);
  const connection = await createTestSlackConnection(before.services.database.db, oldKey, org.organizationId);
  expect((await challenge(before, connection)).json).toEqual({ challenge: 'rotate' });

  // The new key alone cannot open the old secret: 503 naming the secret key.
  const newOnly = await stackWith({ SECRET_KEY: newKey.toString('hex') });
  const refused = await challenge(newOnly, connection);
  expect(refused.status).toBe(503);
  expect(refused.json).toEqual({ error: 'unavailable', dependency: 'secret_key', message: expect.any(String) });

  // During the rotation both work, and link tokens signed with the old key still verify.
  const rotating = await stackWith({ SECRET_KEY: newKey.toString('hex'), SECRET_KEY_PREVIOUS: oldKey.toString('hex') });
  expect((await challenge(rotating, connection)).json).toEqual({ challenge: 'rotate' });
  const { token } = createLinkToken(oldKey, {
    connectionId: connection.connectionId,
    teamId: connection.teamId,
    slackUserId: 'U1',
    now: Date.now(),
    ttlMs: 60_000,
  });
  expect(verifyLinkToken({ current: newKey, previous: oldKey }, token, Date.now()).ok).toBe(true);
  expect(verifyLinkToken(newKey, token, Date.now()).ok).toBe(false);

  // den secrets rotate, as a real process: the old secrets are re-sealed with the new key.
  const rotate = spawnDen(['secrets', 'rotate'], {
    DATABASE_URL: before.config.database.url,
    SECRET_KEY: newKey.toString('hex'),
    SECRET_KEY_PREVIOUS: oldKey.toString('hex'),
    DATA_DIR: before.config.dataDir,
  });
  await rotate.exited;
  // Other test files' connections use the suite's own key: counted as undecryptable, untouched.
  expect(JSON.parse(rotate.output().slice(0, rotate.output().lastIndexOf('}') + 1))).toMatchObject({
    slackConnections: { resealed: expect.any(Number), current: expect.any(Number), undecryptable: expect.any(Number) },
  });
  expect((await challenge(newOnly, connection)).json).toEqual({ challenge: 'rotate' });
  // Idempotent: nothing of ours is left to re-seal.
  const again = await resealSlackSecrets(before.services.database.db, { current: newKey, previous: oldKey });
  const row = await before.services.database.db
    .selectFrom('slack_connections')
    .select('id')
    .where('id', '=', connection.connectionId)
    .executeTakeFirstOrThrow();
  expect(row.id).toBe(connection.connectionId);
  expect(again.resealed).toBe(0);
}, 60_000);
