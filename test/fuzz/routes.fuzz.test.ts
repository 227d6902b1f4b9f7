/**
 * The `npm test` size of the bad-input campaign (npm run fuzz runs the large one): a few hundred
 * property-based inputs per route against a real API process.
 */
import { loadConfig } from '../../src/main/config';
import { openDatabase } from '../../src/app/store/db';
import { createTestOrg } from '../harness/identity';
import { freePort } from '../harness/ports';
import { spawnEntry, type Spawned } from '../harness/process';
import { createSlackConnection } from '../../src/slack/connections';
import { readMetric, runCampaign, type Credentials, type Signers } from './campaign';
import { waitFor } from '../harness/wait';

const base = loadConfig();
let proc: Spawned;
let url: string;
let port: number;
let credentials: Credentials;
let signers: Signers;

beforeAll(async () => {
  port = await freePort();
  proc = spawnEntry('src/bin/serve.ts', {
    DATA_DIR: base.dataDir,
    DATABASE_URL: base.database.url,
    TEMPORAL_ADDRESS: base.temporal.address,
    // No worker listens here: accepted work stays queued in Temporal, nothing runs.
    TEMPORAL_TASK_QUEUE: 'fuzz-no-worker',
    SECRET_KEY: base.secretKey,
    GITHUB_WEBHOOK_SECRET: 'fuzz-secret',
    LOG_LEVEL: 'warn',
    PORT: String(port),
  });
  url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/ready`)).status === 200, 30_000, { intervalMs: 200 });
  const database = openDatabase(base.database.url!);
  try {
    const org = await createTestOrg(database.db);
    const member = await org.addMember('member');
    credentials = { owner: org.owner.apiKey, member: member.apiKey, session: (await org.session(org.owner.memberId)).token };
    // A real installation, so signed inputs get past the signature and reach the parsers.
    const slack = { teamId: 'T0FUZZ', apiAppId: 'A0FUZZ', secret: 'fuzz-slack-secret' };
    const { connectionId } = await createSlackConnection(
      { db: database.db, secretKey: Buffer.from(base.secretKey!, 'hex') },
      {
        organizationId: org.organizationId,
        teamId: slack.teamId,
        apiAppId: slack.apiAppId,
        signingSecret: slack.secret,
      },
    );
    signers = { slack: { ...slack, connectionId }, github: { secret: 'fuzz-secret' } };
  } finally {
    await database.close();
  }
}, 60_000);

afterAll(async () => {
  if (proc.child.exitCode === null) {
    proc.child.kill('SIGTERM');
    await proc.exited;
  }
});

it('no input makes any route answer 5xx, crash the process, or keep memory', async () => {
  const heapBefore = await readMetric(url, 'nodejs_heap_size_used_bytes');
  const { tallies, violations } = await runCampaign({ port, credentials, signers, runsPerRoute: 120, seed: 20261122, hugeBodies: true });

  expect(violations).toEqual([]);
  expect(proc.child.exitCode).toBeNull();
  expect(proc.output()).not.toMatch(/unhandled|uncaught/i);
  expect((await fetch(`${url}/health`)).status).toBe(200);
  for (const tally of tallies) expect(tally.inputs).toBeGreaterThanOrEqual(120);
  // Something reached the validators and handlers, not just the auth wall.
  const statuses = new Set(tallies.flatMap((t) => Object.keys(t.statuses)));
  expect([...statuses]).toEqual(expect.arrayContaining(['400', '401', '413']));
  // Signed inputs got past the signatures: Slack acked or refused on team/app, GitHub accepted some.
  const slackEvents = tallies.find((t) => t.route === 'POST /v1/integrations/slack/{connectionId}/events')!;
  expect((slackEvents.statuses['200'] ?? 0) + (slackEvents.statuses['403'] ?? 0)).toBeGreaterThan(0);
  const github = tallies.find((t) => t.route === 'POST /v1/webhooks/connectors/github')!;
  expect((github.statuses['200'] ?? 0) + (github.statuses['202'] ?? 0)).toBeGreaterThan(0);

  // Memory returns to its baseline once the garbage is collected (light traffic lets V8 run GC).
  const limit = heapBefore * 1.5 + 32 * 1024 * 1024;
  const settled = await waitFor(
    async () => {
      for (let i = 0; i < 20; i++) await fetch(`${url}/health`);
      const heap = await readMetric(url, 'nodejs_heap_size_used_bytes');
      return heap <= limit ? heap : undefined;
    },
    20_000,
    { intervalMs: 250 },
  );
  expect(settled).toBeLessThanOrEqual(limit);

  const total = tallies.reduce((n, t) => n + t.inputs, 0);
  process.stdout.write(
    `fuzz: ${total} inputs over ${tallies.length} routes\n${tallies.map((t) => `  ${t.route}: ${t.inputs} ${JSON.stringify(t.statuses)}`).join('\n')}\n`,
  );
}, 240_000);
