/**
 * Starts the real engines once per `npm test` run, on free ports and a private data dir so the
 * suite passes while `npm start` is running: a Temporal dev server (found the way the service
 * finds it) or TEMPORAL_ADDRESS, and an embedded Postgres or DATABASE_URL. Bundles the
 * workflows once. Test files read the results through the ordinary config variables.
 */
import { FAIRNESS_DYNAMIC_CONFIG } from '../../src/app/temporal/fairness';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { SEARCH_ATTRIBUTES } from '../../src/main/features';
import { WORKFLOW_MODULES } from '../../src/main/worker-code';
import { loadConfig } from '../../src/main/config';
import { startEmbeddedPostgres } from '../../src/app/store/embedded-postgres';
import { createLogger } from '../../src/app/log';
import { openDatabase } from '../../src/app/store/db';
import { migrateToLatest } from '../../src/app/store/migrate';
import { findTemporalCli, startDevServer } from '../../src/app/temporal/dev-server';
import { bundleWorkflows } from '../../src/app/temporal/worker';
import { freePort } from '../harness/ports';
import { bundleDenCli } from './den-bundle';

export default async function globalSetup(): Promise<void> {
  const config = loadConfig();
  const log = createLogger({ level: 'warn', name: 'test-setup' });
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'den-test-'));
  const stops: (() => Promise<void>)[] = [];

  let databaseUrl = config.database.url;
  if (!databaseUrl) {
    const pg = await startEmbeddedPostgres({ dataDir, port: await freePort(), log, logFile: path.join(dataDir, 'postgres.log') });
    stops.push(pg.stop);
    databaseUrl = pg.url;
  }
  let temporalAddress = config.temporal.address;
  if (!temporalAddress) {
    const cli = await findTemporalCli(config.temporal.cliPath, log);
    const server = await startDevServer({
      cli,
      port: await freePort(),
      uiPort: 0,
      headless: true,
      namespace: config.temporal.namespace,
      searchAttributes: SEARCH_ATTRIBUTES,
      // As `npm start` runs it: Fairness on, so the tests see the keys dispatched as in production.
      dynamicConfig: FAIRNESS_DYNAMIC_CONFIG,
      logFile: path.join(dataDir, 'temporal.log'),
      log,
    });
    stops.push(server.stop);
    temporalAddress = server.address;
  }

  const database = openDatabase(databaseUrl);
  await migrateToLatest(database.db);
  await database.close();

  const bundlePath = path.join(dataDir, 'workflow-bundle.js');
  await fs.writeFile(bundlePath, await bundleWorkflows(WORKFLOW_MODULES));
  const denBundle = await bundleDenCli();

  Object.assign(process.env, {
    DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    WORKFLOW_BUNDLE_PATH: bundlePath,
    DEN_TEST_CLI_BUNDLE: denBundle,
    SECRET_KEY: randomBytes(32).toString('hex'),
    // Quiet by default; LOG_LEVEL=debug npm test shows the service's logs.
    LOG_LEVEL: config.logLevel === 'info' ? 'silent' : config.logLevel,
    NODE_ENV: 'test',
  });
  (globalThis as { __denTestStops?: typeof stops; __denTestDataDir?: string }).__denTestStops = stops;
  (globalThis as { __denTestDataDir?: string }).__denTestDataDir = dataDir;
  stops.push(() => fs.rm(denBundle, { force: true }));
}
