/**
 * `npm run fuzz [-- --runs N --seed S | --long]`: the large bad-input campaign against a real API
 * process. `--long` sends at least 100,000 inputs (spread evenly over every route).
 * Exits non-zero if any input gets a 5xx (other than a dependency 503), crashes the process, or
 * leaves its memory above baseline.
 */
import { parseArgs } from 'node:util';
import { createTestOrg } from '../test/harness/identity';
import { createSlackConnection } from '../src/slack/connections';
import { readMetric, runCampaign } from '../test/fuzz/campaign';
import { waitFor } from '../test/harness/wait';
import { startBenchStack } from './lib/stack';
import { exitWith } from './lib/exit';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { runs: { type: 'string', default: '2000' }, seed: { type: 'string' }, long: { type: 'boolean', default: false } },
  });
  const runsPerRoute = Number(values.runs);
  // --long: at least 100,000 inputs, spread over the routes the server's OpenAPI document lists.
  const totalInputs = values.long ? 100_000 : undefined;
  const stack = await startBenchStack();
  try {
    const org = await createTestOrg(stack.database.db);
    const member = await org.addMember('member');
    const credentials = { owner: org.owner.apiKey, member: member.apiKey, session: (await org.session(org.owner.memberId)).token };
    // A real installation, so half the Slack and GitHub inputs get past the signature checks.
    const slack = { teamId: 'T0FUZZ', apiAppId: 'A0FUZZ', secret: 'fuzz-slack-secret' };
    const { connectionId } = await createSlackConnection(
      { db: stack.database.db, secretKey: Buffer.from(stack.env.SECRET_KEY!, 'hex') },
      {
        organizationId: org.organizationId,
        teamId: slack.teamId,
        apiAppId: slack.apiAppId,
        signingSecret: slack.secret,
      },
    );
    const signers = { slack: { ...slack, connectionId }, github: { secret: stack.secrets.github } };
    const port = Number(new URL(stack.api.url!).port);
    const heapBefore = await readMetric(stack.api.url!, 'nodejs_heap_size_used_bytes');
    const started = Date.now();
    const { tallies, violations } = await runCampaign({
      port,
      credentials,
      signers,
      runsPerRoute,
      totalInputs,
      seed: values.seed ? Number(values.seed) : undefined,
      hugeBodies: true,
    });
    const seconds = (Date.now() - started) / 1000;

    let heapAfter = Infinity;
    const limit = heapBefore * 1.5 + 32 * 1024 * 1024;
    await waitFor(
      async () => {
        for (let i = 0; i < 20; i++) await fetch(`${stack.api.url}/health`);
        heapAfter = await readMetric(stack.api.url!, 'nodejs_heap_size_used_bytes');
        return heapAfter <= limit;
      },
      30_000,
      { intervalMs: 500 },
    ).catch(() => undefined);

    const total = tallies.reduce((n, t) => n + t.inputs, 0);
    console.log(`\n| route | inputs | statuses |\n|---|---|---|`);
    for (const t of tallies)
      console.log(
        `| ${t.route} | ${t.inputs} | ${Object.entries(t.statuses)
          .map(([s, n]) => `${s}×${n}`)
          .join(' ')} |`,
      );
    console.log(`\n${total} inputs over ${tallies.length} routes in ${seconds.toFixed(1)} s`);
    console.log(`violations (5xx or no answer): ${violations.length}`);
    console.log(`API process alive: ${stack.api.alive()}`);
    console.log(
      `heap used: ${(heapBefore / 2 ** 20).toFixed(1)} MiB before, ${(heapAfter / 2 ** 20).toFixed(1)} MiB after (limit ${(limit / 2 ** 20).toFixed(1)} MiB)`,
    );
    for (const v of violations.slice(0, 10)) console.log(`  ${v.status} ${v.request.slice(0, 300)} → ${v.body}`);
    const crashed = !stack.api.alive() || /unhandled|uncaught/i.test(stack.api.output);
    return violations.length === 0 && !crashed && heapAfter <= limit ? 0 : 1;
  } finally {
    await stack.stop();
  }
}

exitWith(main());
