/**
 * Deploy safety: every history recorded in test/histories/ (real runs of every
 * workflow type, see record.histories.ts) must replay against today's workflow code. A change
 * that breaks determinism fails here, in CI, instead of failing every live workflow on the next
 * worker start. How to change a workflow safely: docs/architecture.md, "Changing a workflow".
 */
import fs from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { loadConfig } from '../../src/main/config';

// The SDK's default logger prints every replay worker's state changes at INFO: only problems here.
Runtime.install({ logger: new DefaultLogger('WARN') });

const DIR = path.resolve(__dirname, '../histories');
const files = fs
  .readdirSync(DIR)
  .filter((file) => file.endsWith('.json'))
  .sort();
/** The proto's plain-object form, as record.histories.ts wrote it. */
const read = (file: string) => temporal.api.history.v1.History.fromObject(JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8')));

it('has a recorded history of every workflow type', () => {
  const types = new Set(
    files.map((file) => {
      const history = read(file);
      return history.events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name;
    }),
  );
  expect([...types].sort()).toEqual(['automationRun', 'githubDelivery', 'githubReconcile', 'githubTarget', 'mcpResolve', 'slackEvent']);
});

/**
 * One replay worker for every history: the results come one by one, each named by its file, so a
 * failure says which history broke. (A worker per history cost a third of a second each to load
 * the bundle, 88 times over.)
 */
it('every recorded history replays against the current workflow code', async () => {
  const bundle = loadConfig().temporal.workflowBundlePath!;
  const histories = files.map((file) => ({ workflowId: file.replace(/\.json$/, ''), history: read(file) }));
  const replayed: string[] = [];
  const failures: string[] = [];
  for await (const result of Worker.runReplayHistories({ workflowBundle: { codePath: bundle }, replayName: 'recorded' }, histories)) {
    replayed.push(result.workflowId);
    if (result.error) failures.push(`${result.workflowId}.json: ${result.error.message}`);
  }
  expect(failures).toEqual([]);
  expect(replayed.sort()).toEqual(histories.map((h) => h.workflowId).sort());
}, 120_000);
