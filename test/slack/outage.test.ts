/** An ack means durable: with Temporal unreachable, supported events get 503, never 200. */
import { createTestOrg } from '../harness/identity';
import { closedPort } from '../harness/ports';
import { appMention, createTestSlackConnection, eventEnvelope, newSlackUserId, postSlackEvent, postSlashCommand } from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';

describe('Slack ingress with Temporal unreachable', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}` } });
  });
  afterAll(() => stack.stop());

  it.each(['slack', 'chatplatform'] as const)('503 for a supported event on /%s, within the start timeout', async (provider) => {
    const org = await createTestOrg(stack.services.database.db);
    const connection = await createTestSlackConnection(stack.services.database.db, stack.services.secretKey, org.organizationId);
    const started = Date.now();
    const res = await postSlackEvent(stack, connection, eventEnvelope(connection, appMention(newSlackUserId())), { provider });
    expect(res.status).toBe(503);
    expect(res.json).toMatchObject({ error: 'unavailable', dependency: 'temporal' });
    expect(res.headers.get('retry-after')).toBe('5');
    // Bounded by TEMPORAL_START_TIMEOUT (2 s). The Temporal client overshoots it by up to ~1.5 s
    // while its lazy connection is failing (temporalCall, reported to the platform owner), so
    // the bound here is loose: the point is that the sender gets a prompt 503, never a hang.
    expect(Date.now() - started).toBeLessThan(5000);

    // What needs no Temporal still works: the challenge, ineligible events, slash commands.
    const challenge = await postSlackEvent(stack, connection, { type: 'url_verification', challenge: 'c' }, { provider });
    expect(challenge.status).toBe(200);
    expect(challenge.json).toEqual({ challenge: 'c' });
    const bot = await postSlackEvent(stack, connection, eventEnvelope(connection, { ...appMention('U1'), bot_id: 'B1' }), { provider });
    expect(bot.status).toBe(200);
    expect(bot.json).toEqual({ ok: true });
    const command = await postSlashCommand(stack, connection, { user_id: newSlackUserId() }, { provider });
    expect(command.status).toBe(200);
    expect(command.json.response_type).toBe('ephemeral');
  });
});
