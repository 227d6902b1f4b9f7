/**
 * `den runtime` renews its own runner token: on a stack whose tokens live 10 s (set here, so that
 * a token's life passes within the test; the default is 12 h), a runtime started from an API key
 * renews at half its token's life, again and again, and still claims and completes a run once the
 * token it minted first has expired.
 */
import { createTestOrg } from '../harness/identity';
import { spawnDen } from '../harness/process';
import { runResult, startQueuedRun } from '../harness/runs';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

const TOKEN_TTL_MS = 10_000;

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ worker: true, env: { RUNNER_TOKEN_TTL: `${TOKEN_TTL_MS}ms` } });
});
afterAll(() => stack.stop());

it('renews its token before it expires, and keeps working past the first token’s life', async () => {
  const org = await createTestOrg(stack.services.database.db);
  const member = await org.addMember('member');
  const runtime = spawnDen(['runtime', '--exec', 'tr a-z A-Z', '--wait', '2', '--heartbeat-interval', '1'], {
    DEN_API_URL: stack.url,
    DEN_API_KEY: member.apiKey,
  });
  try {
    await waitFor(() => runtime.output().includes('claiming runs from'), 60_000, { what: 'den runtime to start' });
    const runnerId = /as runner (rnr_\w+)/.exec(runtime.output())![1]!;
    const tokens = () =>
      stack.services.database.db
        .selectFrom('runner_tokens')
        .select(['expires_at'])
        .where('runner_id', '=', runnerId)
        .orderBy('expires_at')
        .execute();
    const [first] = await tokens();
    // Past the first token's life, with two renewals behind it.
    await waitFor(() => Date.now() > first!.expires_at.getTime() + 1_000, TOKEN_TTL_MS + 5_000, { intervalMs: 200 });
    expect((await tokens()).length).toBeGreaterThanOrEqual(3);
    expect(runtime.output().match(/renewed the runner token/g)?.length ?? 0).toBeGreaterThanOrEqual(2);

    const { runId } = await startQueuedRun(stack, { organizationId: org.organizationId, memberId: member.memberId, text: 'still here' });
    expect(await runResult(stack, org.organizationId, runId, 30_000)).toMatchObject({
      status: 'succeeded',
      lastAssistantText: 'STILL HERE',
    });
  } finally {
    runtime.child.kill('SIGINT');
  }
  expect((await runtime.exited).code).toBe(0);
  expect(runtime.output()).not.toContain(member.apiKey);
}, 90_000);
