/**
 * A target's workflow never fails: when its sync activity gives up for good (here a worker whose
 * `githubSyncTarget` always throws a non-retryable failure, standing in for one that ran out of
 * retries on a broken Postgres), the batch ends `failed` (`sync_error`), recorded by the real
 * activity, and the workflow goes on serving the next sync. The real workflow bundle, Temporal and
 * Postgres; only that one activity is replaced.
 */
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { createGithubActivities } from '../../activities/github';
import { githubTargetWorkflowId } from '../../src/github/contract';
import { getTarget, recordResync } from '../../src/github/target-records';
import { signalTarget } from '../../src/github/target-signal';
import { loadConfig } from '../../src/main/config';
import { freshId, ownedTarget } from '../harness/github';
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';

// The SDK's default logger prints every worker's state changes at INFO: only problems here.
Runtime.install({ logger: new DefaultLogger('WARN') });

let stack: TestStack;
let connection: NativeConnection;

beforeAll(async () => {
  stack = await startTestStack({ env: { GITHUB_APP_ID: '1', GITHUB_APP_PRIVATE_KEY: 'not-used', GITHUB_TARGET_IDLE: '1m' } });
  connection = await NativeConnection.connect({ address: stack.config.temporal.address! });
});
afterAll(async () => {
  await connection.close();
  await stack.stop();
});

const db = () => stack.services.database.db;

it('an activity that gives up ends its batch `failed` (sync_error), recorded, and the workflow goes on', async () => {
  const org = await createTestOrg(db());
  const n = freshId();
  const targetId = await ownedTarget(db(), {
    organizationId: org.organizationId,
    installationId: freshId(),
    repositoryFullName: `octo-${n}/broken-${n}`,
    repositoryId: n,
  });
  const target = (await getTarget(db(), targetId))!;
  const real = createGithubActivities({
    db: db(),
    settings: stack.config.github,
    ingress: stack.ingress,
    platform: { publicBaseUrl: 'http://127.0.0.1', taskQueue: stack.config.temporal.taskQueue, authCaches: stack.config.authCaches },
    log: stack.services.log,
  });
  let attempts = 0;
  const worker = await Worker.create({
    connection,
    namespace: stack.config.temporal.namespace,
    taskQueue: stack.config.temporal.taskQueue,
    workflowBundle: { codePath: loadConfig().temporal.workflowBundlePath! },
    activities: {
      ...real,
      githubSyncTarget: async () => {
        attempts += 1;
        throw ApplicationFailure.nonRetryable('the sync broke for good', 'TestFault');
      },
    },
  });
  await worker.runUntil(async () => {
    const first = await recordResync(db(), { target, reason: 'manual' });
    await signalTarget(stack.ingress, { target, signal: { eventId: first, full: true }, idleMs: 60_000, admission: 'bypass' });
    const failed = await waitFor(
      async () => {
        const row = await db().selectFrom('github_sync_events').selectAll().where('id', '=', first).executeTakeFirst();
        return row?.status === 'failed' && row;
      },
      20_000,
      { what: 'the batch to end failed' },
    );
    expect(failed).toMatchObject({ error_code: 'sync_error', error_message: expect.stringContaining('the sync broke for good') });
    expect(
      await db().selectFrom('github_connector_targets').selectAll().where('id', '=', targetId).executeTakeFirstOrThrow(),
    ).toMatchObject({
      last_sync_status: 'failed',
      last_sync_error_code: 'sync_error',
    });
    const handle = stack.services.temporal.client.workflow.getHandle(githubTargetWorkflowId(targetId));
    expect((await handle.describe()).status.name).toBe('RUNNING');

    // The same workflow takes the next sync.
    const second = await recordResync(db(), { target, reason: 'manual' });
    await signalTarget(stack.ingress, { target, signal: { eventId: second, full: true }, idleMs: 60_000, admission: 'bypass' });
    await waitFor(
      async () =>
        (await db().selectFrom('github_sync_events').select('status').where('id', '=', second).executeTakeFirst())?.status === 'failed',
      20_000,
      { what: 'the second batch' },
    );
    expect(attempts).toBe(2);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    await handle.terminate(`test over ${randomUUID()}`);
  });
});
