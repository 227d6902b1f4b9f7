/**
 * Replayed slash commands over real HTTP: a signed request is answered once within its signature
 * window, on any replica (the cache is in the suite's Postgres), and expired entries are swept.
 */
import { slackFeature } from '../../src/slack';
import type { WorkerDeps } from '../../src/app/feature';
import { createTestOrg } from '../harness/identity';
import {
  createTestSlackConnection,
  linkTokenFrom,
  newSlackUserId,
  slackSignatureHeaders,
  type TestSlackConnection,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';

let first: TestStack;
let second: TestStack;
let connection: TestSlackConnection;

beforeAll(async () => {
  // Two replicas of the API on the same database, neither with a worker: commands need none.
  first = await startTestStack();
  second = await startTestStack();
  const org = await createTestOrg(first.services.database.db);
  connection = await createTestSlackConnection(first.services.database.db, first.services.secretKey, org.organizationId);
});
afterAll(async () => {
  await first?.stop();
  await second?.stop();
});

const db = () => first.services.database.db;

/** One captured command: the exact bytes and headers Slack signed. */
function capture(timestamp = Math.floor(Date.now() / 1000)) {
  const raw = new URLSearchParams({
    token: 'deprecated',
    team_id: connection.teamId,
    api_app_id: connection.appId,
    user_id: newSlackUserId(),
    command: '/den',
    text: '',
  }).toString();
  return {
    raw,
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...slackSignatureHeaders(connection.signingSecret, raw, timestamp) },
  };
}

const send = (stack: TestStack, request: ReturnType<typeof capture>, provider = 'slack') =>
  stack.request('POST', `/v1/integrations/${provider}/${connection.connectionId}/commands`, request);

const cacheRows = () => db().selectFrom('slack_request_replays').selectAll().where('connection_id', '=', connection.connectionId).execute();

describe('slash command replays', () => {
  it('a replay within the signature window is 401 {ok:false}, like a bad signature, and mints no second token', async () => {
    const request = capture();
    const answered = await send(first, request);
    expect(answered.status).toBe(200);
    expect(linkTokenFrom(answered.json.text)).toEqual(expect.any(String));

    for (const provider of ['slack', 'chatplatform']) {
      const replayed = await send(first, request, provider);
      expect(replayed.status).toBe(401);
      expect(replayed.json).toEqual({ ok: false });
      expect(replayed.text).not.toContain('token=');
    }
    const metrics = (await first.request('GET', '/metrics')).text;
    expect(metrics).toMatch(/den_signature_failures_total\{route="[^"]*commands",reason="replayed"\} [1-9]/);
  });

  it('the same user sending the command again (a new timestamp, so a new signature) is answered', async () => {
    const request = capture(Math.floor(Date.now() / 1000) - 2);
    expect((await send(first, request)).status).toBe(200);
    const again = { ...request, headers: { ...request.headers, ...slackSignatureHeaders(connection.signingSecret, request.raw) } };
    const res = await send(first, again);
    expect(res.status).toBe(200);
    expect(linkTokenFrom(res.json.text)).toEqual(expect.any(String));
  });

  it('two replicas share the cache: a request answered by one is a replay on the other, also when both race', async () => {
    const request = capture();
    expect((await send(first, request)).status).toBe(200);
    const replayed = await send(second, request);
    expect(replayed.status).toBe(401);
    expect(replayed.json).toEqual({ ok: false });

    const raced = capture();
    const answers = await Promise.all([send(first, raced), send(second, raced), send(first, raced), send(second, raced)]);
    expect(answers.map((res) => res.status).sort()).toEqual([200, 401, 401, 401]);
  });

  it('a request that fails verification is not cached: only verified requests take a place', async () => {
    const before = (await cacheRows()).length;
    const request = capture();
    const forged = { ...request, headers: { ...request.headers, 'x-slack-signature': `v0=${'0'.repeat(64)}` } };
    expect((await send(first, forged)).status).toBe(401);
    expect(await cacheRows()).toHaveLength(before);
    expect((await send(first, request)).status).toBe(200);
    expect(await cacheRows()).toHaveLength(before + 1);
  });

  it("the worker's sweep deletes entries whose window has closed, and keeps the others", async () => {
    const request = capture();
    expect((await send(first, request)).status).toBe(200);
    const rows = await cacheRows();
    expect(rows.length).toBeGreaterThan(0);
    const latest = Math.max(...rows.map((row) => row.expires_at.getTime()));

    const sweep = slackFeature.sweeps?.find((candidate) => candidate.name === 'slack replay cache');
    expect(sweep).toBeDefined();
    const deps = { db: db(), log: first.services.log } as unknown as WorkerDeps<never>;
    await sweep!.run(deps, new Date(latest - 1));
    expect((await cacheRows()).length).toBeGreaterThan(0);
    await sweep!.run(deps, new Date(latest + 1));
    expect(await cacheRows()).toEqual([]);
  });
});
